package tenant

import (
	"fmt"
	"strings"
)

// Principal is an IAM identity as the stage config names it and as API
// Gateway's IAM authorizer reports the caller: its partition, account,
// kind (role or user) and name. A role's path is not part of it: the ARN
// of a session of an assumed role (arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION)
// carries no path, and a role's name is unique in its account whatever
// its path.
type Principal struct {
	Partition, Account, Kind, Name string
}

// String is the principal's key, as logs and messages show it.
func (p Principal) String() string {
	return "arn:" + p.Partition + ":iam::" + p.Account + ":" + p.Kind + "/" + p.Name
}

// ParseConfigPrincipal reads a principal the stage config names: an IAM
// role ARN (arn:aws:iam::ACCOUNT:role/PATH/NAME) or user ARN
// (arn:aws:iam::ACCOUNT:user/PATH/NAME). Wildcards and other resources are
// refused: one entry names one identity.
func ParseConfigPrincipal(arn string) (Principal, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || parts[3] != "" {
		return Principal{}, fmt.Errorf("%q is not an IAM role or user ARN (arn:aws:iam::123456789012:role/NAME)", arn)
	}
	p, err := resource(parts[1], parts[4], parts[5], arn)
	if err != nil {
		return Principal{}, err
	}
	if p.Kind != "role" && p.Kind != "user" {
		return Principal{}, fmt.Errorf("%q is not an IAM role or user ARN (arn:aws:iam::123456789012:role/NAME)", arn)
	}
	return p, nil
}

// ParseCaller reads the ARN API Gateway's IAM authorizer reports for a
// caller: a user ARN, a role ARN, or the ARN of an assumed role's session,
// which names the role.
func ParseCaller(arn string) (Principal, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[3] != "" {
		return Principal{}, fmt.Errorf("%q is not an IAM ARN", arn)
	}
	switch parts[2] {
	case "iam":
		return ParseConfigPrincipal(arn)
	case "sts":
		kind, rest, _ := strings.Cut(parts[5], "/")
		name, session, ok := strings.Cut(rest, "/")
		if kind != "assumed-role" || !ok || name == "" || session == "" || !validAccount(parts[4]) {
			return Principal{}, fmt.Errorf("%q is not an assumed-role session ARN", arn)
		}
		return Principal{Partition: parts[1], Account: parts[4], Kind: "role", Name: name}, nil
	}
	return Principal{}, fmt.Errorf("%q is not an IAM ARN", arn)
}

func resource(partition, account, res, arn string) (Principal, error) {
	if partition == "" || !validAccount(account) {
		return Principal{}, fmt.Errorf("%q has no partition or no 12-digit account", arn)
	}
	if strings.ContainsAny(res, "*?") {
		return Principal{}, fmt.Errorf("%q has a wildcard; name each role or user", arn)
	}
	kind, path, ok := strings.Cut(res, "/")
	if !ok {
		return Principal{}, fmt.Errorf("%q names no role or user", arn)
	}
	name := path[strings.LastIndex(path, "/")+1:]
	if name == "" {
		return Principal{}, fmt.Errorf("%q names no role or user", arn)
	}
	return Principal{Partition: partition, Account: account, Kind: kind, Name: name}, nil
}

func validAccount(a string) bool {
	if len(a) != 12 {
		return false
	}
	for _, c := range a {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Key is what two spellings of one principal share: IAM does not tell
// names apart by case, so no two roles (or users) of an account differ only
// in case.
func (p Principal) Key() string {
	return p.Partition + ":" + p.Account + ":" + p.Kind + "/" + strings.ToLower(p.Name)
}
