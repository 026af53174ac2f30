package attest

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Errors a verification ends with; each wraps one of them with a sentence
// a person can act on (never a credential).
var (
	// ErrUnauthenticated: the identity request is malformed, not signed as
	// required, too old, for another stage, or refused by STS.
	ErrUnauthenticated = errors.New("identity not proven")
	// ErrDenied: STS vouched for the caller, but it is not one of the
	// fleet's instances (another role, or not in service in its groups).
	ErrDenied = errors.New("identity not allowed in this fleet")
	// ErrUnavailable: STS or Auto Scaling could not be asked; retry.
	ErrUnavailable = errors.New("identity could not be checked now")
)

// Instances says which Auto Scaling group an instance belongs to and its
// lifecycle state there; group "" when it is in none. pkg/aws/asg's
// Adapter answers it from DescribeAutoScalingInstances.
type Instances interface {
	InstanceGroup(ctx context.Context, instanceID string) (group, state string, err error)
}

// Pool says whether an instance is one of a fleet's stopped Spot pool
// (docs/scaling.md, "The Spot pool in AWS and on the dev stack") and its
// state there; found is false when it is not. pkg/aws/store's Store
// answers it from the pool's records.
type Pool interface {
	PoolInstanceOf(ctx context.Context, fleet, instanceID string) (p scaling.PoolInstance, found bool, err error)
}

// Fleet is what a fleet's instances are: its worker role, its groups (the
// Spot group and, with the On-Demand rung, the On-Demand one), and its
// Spot pool's instances when it has one.
type Fleet struct {
	// RoleARN is the fleet's worker role (arn:aws:iam::<account>:role/<name>).
	RoleARN string
	Groups  []string
	// SpotPool: the fleet keeps a stopped Spot pool, whose instances run
	// outside its groups; a started one (starting or running in the pool's
	// records) is one of the fleet's instances too.
	SpotPool bool
}

// Config tunes a Verifier.
type Config struct {
	// ServerID is the stage's name: an identity request must carry it in
	// the signed X-Fleetq-Server-Id header.
	ServerID string
	// Fleets are the fleets that accept attested registration, by slug.
	Fleets map[string]Fleet
	// MaxAge is how far an identity request's X-Amz-Date may be from now,
	// either way (default 5 minutes): a request replayed later is refused.
	MaxAge time.Duration
	// HTTP sends the identity requests to STS (default: a client with a
	// 10-second timeout).
	HTTP *http.Client
	// Clock tells now (default the wall clock).
	Clock clock.Clock
	// Pool finds the Spot pool instances of the fleets with SpotPool
	// (required when a fleet has one).
	Pool Pool
}

// Verifier checks attested registrations.
type Verifier struct {
	sts       *url.URL
	instances Instances
	c         Config
}

// NewVerifier returns a verifier that forwards identity requests to the
// STS endpoint (and only there: the request's own URL must name it) and
// finds instances' groups through instances.
func NewVerifier(stsEndpoint string, instances Instances, c Config) (*Verifier, error) {
	u, err := url.Parse(stsEndpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("attest: STS endpoint %q must be an http(s) URL without user or query", stsEndpoint)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	if c.ServerID == "" {
		return nil, errors.New("attest: no server id")
	}
	if instances == nil {
		return nil, errors.New("attest: no instance lookup")
	}
	roles := map[string]string{}
	for slug, f := range c.Fleets {
		a, r, err := roleOf(f.RoleARN)
		if err != nil {
			return nil, fmt.Errorf("attest: fleet %s: %w", slug, err)
		}
		if other, dup := roles[a+"/"+r]; dup {
			return nil, fmt.Errorf("attest: fleets %s and %s share the worker role %s: each fleet needs its own", other, slug, f.RoleARN)
		}
		roles[a+"/"+r] = slug
		if len(f.Groups) == 0 {
			return nil, fmt.Errorf("attest: fleet %s has no group", slug)
		}
		if f.SpotPool && c.Pool == nil {
			return nil, fmt.Errorf("attest: fleet %s has a Spot pool and no pool lookup", slug)
		}
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 5 * time.Minute
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return &Verifier{sts: u, instances: instances, c: c}, nil
}

// Identity is what a verified identity request proved.
type Identity struct {
	Fleet      string // the fleet whose worker role signed
	Account    string
	Role       string // the role's name
	InstanceID string // the role session's name: the instance profile's instance
	Group      string // the fleet's group the instance is in ("" for a pool instance)
	State      string // its lifecycle state there, or its state in the fleet's Spot pool
	// SpotPool: the instance is one of the fleet's Spot pool instances,
	// started (in no group).
	SpotPool bool
	// PoolStartedAt is when the pool started the instance: its record's
	// time while it is starting (zero when it is running already: EC2
	// restarted it after an interruption, or its agent registers again).
	PoolStartedAt time.Time
}

func unauthenticated(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrUnauthenticated)
}

func denied(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrDenied)
}

// instanceIDPattern is an instance id as a role session name carries it.
var instanceIDPattern = regexp.MustCompile(`^i-[0-9A-Za-z-]{1,60}$`)

// Verify checks a signed identity request: its shape and server id and
// date here, its signature by STS, then that STS's caller is a fleet's
// worker role on an instance in service (or launching) in one of that
// fleet's groups, or, when it is in none, a started instance of the
// fleet's Spot pool. The fleet is the role's: one role per fleet.
func (v *Verifier) Verify(ctx context.Context, id *wire.AWSIdentity) (Identity, error) {
	req, err := v.forwardable(ctx, id)
	if err != nil {
		return Identity{}, err
	}
	arn, err := v.callerIdentity(req)
	if err != nil {
		return Identity{}, err
	}
	out, err := parseAssumedRole(arn)
	if err != nil {
		return Identity{}, err
	}
	fleet, f, ok := v.fleetOf(out.Account, out.Role)
	if !ok {
		return Identity{}, denied("the identity is role %s of account %s, no fleet's worker role", out.Role, out.Account)
	}
	out.Fleet = fleet
	group, state, err := v.instances.InstanceGroup(ctx, out.InstanceID)
	if err != nil {
		return Identity{}, fmt.Errorf("find the group of instance %s: %v: %w", out.InstanceID, err, ErrUnavailable)
	}
	in := scaling.Instance{ID: out.InstanceID, LifecycleState: state}
	if slices.Contains(f.Groups, group) && (in.InService() || in.Booting()) {
		out.Group, out.State = group, state
		return out, nil
	}
	if group == "" && f.SpotPool {
		return v.poolInstance(ctx, out, fleet)
	}
	return Identity{}, denied("instance %s is not in service in fleet %s's groups", out.InstanceID, fleet)
}

// poolInstance accepts an instance of no group that the fleet's Spot pool
// started: starting or running in its records. A stopped, stopping,
// interrupted or unknown one is denied.
func (v *Verifier) poolInstance(ctx context.Context, out Identity, fleet string) (Identity, error) {
	p, found, err := v.c.Pool.PoolInstanceOf(ctx, fleet, out.InstanceID)
	if err != nil {
		return Identity{}, fmt.Errorf("find instance %s in fleet %s's Spot pool: %v: %w", out.InstanceID, fleet, err, ErrUnavailable)
	}
	if !found {
		return Identity{}, denied("instance %s is not in service in fleet %s's groups nor in its Spot pool", out.InstanceID, fleet)
	}
	if p.State != scaling.PoolStarting && p.State != scaling.PoolRunning {
		return Identity{}, denied("instance %s of fleet %s's Spot pool is %s, not started", out.InstanceID, fleet, p.State)
	}
	out.State, out.SpotPool = string(p.State), true
	if p.State == scaling.PoolStarting {
		out.PoolStartedAt = p.Since
	}
	return out, nil
}

// fleetOf is the fleet whose worker role is account's role.
func (v *Verifier) fleetOf(account, role string) (string, Fleet, bool) {
	for slug, f := range v.c.Fleets {
		if a, r, _ := roleOf(f.RoleARN); a == account && r == role {
			return slug, f, true
		}
	}
	return "", Fleet{}, false
}

// forwardable checks the identity request and builds the request sent to
// STS: to the configured endpoint, with the signed headers only.
func (v *Verifier) forwardable(ctx context.Context, id *wire.AWSIdentity) (*http.Request, error) {
	if id == nil {
		return nil, unauthenticated("no identity request")
	}
	if id.Method != http.MethodPost {
		return nil, unauthenticated("the identity request must be a POST, not %q", id.Method)
	}
	u, err := url.Parse(id.URL)
	if err != nil || u.Scheme != v.sts.Scheme || u.Host != v.sts.Host || (u.Path != "" && u.Path != v.sts.Path) || u.RawQuery != "" || u.User != nil {
		// Only ever STS: a URL of the caller's choosing would make the API
		// send requests anywhere.
		return nil, unauthenticated("the identity request must be for %s", v.sts)
	}
	form, err := url.ParseQuery(id.Body)
	if err != nil || len(form) != 2 || form.Get("Action") != "GetCallerIdentity" || form.Get("Version") != "2011-06-15" || len(form["Action"]) != 1 || len(form["Version"]) != 1 {
		return nil, unauthenticated("the identity request's body must be %s", IdentityBody)
	}
	headers := http.Header{}
	for k, val := range id.Headers {
		headers.Set(k, val)
	}
	signed, err := signedHeaders(headers.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"host", "x-amz-date", strings.ToLower(wire.HeaderServerID)} {
		if !slices.Contains(signed, h) {
			return nil, unauthenticated("the identity request must sign the %s header", h)
		}
	}
	if got := headers.Get(wire.HeaderServerID); got != v.c.ServerID {
		return nil, unauthenticated("the identity request is for server %q; this is stage %q", got, v.c.ServerID)
	}
	signedAt, err := time.Parse("20060102T150405Z", headers.Get("X-Amz-Date"))
	if err != nil {
		return nil, unauthenticated("the identity request's X-Amz-Date is missing or malformed")
	}
	if d := v.c.Clock.Now().Sub(signedAt); d > v.c.MaxAge || d < -v.c.MaxAge {
		return nil, unauthenticated("the identity request was signed at %s, more than %s from now; sign a fresh one", signedAt.Format(time.RFC3339), v.c.MaxAge)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.sts.String(), strings.NewReader(id.Body))
	if err != nil {
		return nil, fmt.Errorf("build the STS request: %w", err)
	}
	req.Header.Set("Authorization", headers.Get("Authorization"))
	for _, h := range signed {
		switch h {
		case "host", "content-length":
			continue // the transport writes them: the endpoint's host, the body's length
		}
		val, present := headers[http.CanonicalHeaderKey(h)]
		if !present {
			return nil, unauthenticated("the identity request signs header %s but does not carry it", h)
		}
		req.Header[http.CanonicalHeaderKey(h)] = val
	}
	return req, nil
}

// signedHeaders reads the SignedHeaders of a SigV4 Authorization header.
func signedHeaders(authz string) ([]string, error) {
	rest, ok := strings.CutPrefix(authz, "AWS4-HMAC-SHA256 ")
	if !ok {
		return nil, unauthenticated("the identity request has no Signature Version 4 Authorization header")
	}
	for _, part := range strings.Split(rest, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "SignedHeaders="); ok && v != "" {
			return strings.Split(v, ";"), nil
		}
	}
	return nil, unauthenticated("the identity request's Authorization header names no SignedHeaders")
}

type callerIdentityResponse struct {
	Result struct {
		Arn     string `xml:"Arn"`
		Account string `xml:"Account"`
	} `xml:"GetCallerIdentityResult"`
}

type stsErrorResponse struct {
	Error struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
}

// callerIdentity sends the request to STS and answers the caller's ARN.
func (v *Verifier) callerIdentity(req *http.Request) (string, error) {
	res, err := v.c.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("call STS: %v: %w", err, ErrUnavailable)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read STS's answer: %v: %w", err, ErrUnavailable)
	}
	switch {
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return "", fmt.Errorf("STS answered %d: %w", res.StatusCode, ErrUnavailable)
	case res.StatusCode != http.StatusOK:
		var e stsErrorResponse
		_ = xml.Unmarshal(body, &e)
		if e.Error.Code == "Throttling" {
			return "", fmt.Errorf("STS is throttling: %w", ErrUnavailable)
		}
		return "", unauthenticated("STS refused the identity request (%d %s: %s)", res.StatusCode, e.Error.Code, e.Error.Message)
	}
	var out callerIdentityResponse
	if err := xml.Unmarshal(body, &out); err != nil || out.Result.Arn == "" {
		return "", fmt.Errorf("STS's answer has no caller ARN: %w", ErrUnavailable)
	}
	return out.Result.Arn, nil
}

// parseAssumedRole reads arn:<partition>:sts::<account>:assumed-role/<role>/<session>.
func parseAssumedRole(arn string) (Identity, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sts" {
		return Identity{}, denied("the identity %s is not a role session", arn)
	}
	res := strings.Split(parts[5], "/")
	if len(res) != 3 || res[0] != "assumed-role" {
		return Identity{}, denied("the identity %s is not a role session (an instance profile's credentials are)", arn)
	}
	if !instanceIDPattern.MatchString(res[2]) {
		return Identity{}, denied("the identity's session %q is not an instance id: use the instance profile's own credentials", res[2])
	}
	return Identity{Account: parts[4], Role: res[1], InstanceID: res[2]}, nil
}

// roleOf reads the account and name of arn:<partition>:iam::<account>:role/[<path>/]<name>.
func roleOf(arn string) (account, name string, err error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || parts[4] == "" || !strings.HasPrefix(parts[5], "role/") {
		return "", "", fmt.Errorf("worker role %q is not an IAM role ARN", arn)
	}
	return parts[4], parts[5][strings.LastIndex(parts[5], "/")+1:], nil
}
