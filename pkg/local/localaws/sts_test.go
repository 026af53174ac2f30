package localaws_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// The real SDK client signs GetCallerIdentity; the server verifies the
// signature and answers the role session the credentials were issued to.
// A wrong secret key, a key it never issued, a missing session token and
// a clock 20 minutes off are refused with STS's codes.
func TestSTSVerifiesSignatures(t *testing.T) {
	var skew atomic.Int64
	srv, err := localaws.StartSTS("", func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	creds := srv.Issue(localaws.STSCaller{Role: "fleetq-dev-demo-worker", Session: "i-local-demo-0001"})
	call := func(c aws.Credentials, off time.Duration) (*sts.GetCallerIdentityOutput, error) {
		skew.Store(int64(off))
		client := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.StaticCredentialsProvider{Value: c}, Retryer: aws.NopRetryer{}})
		return client.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	}
	out, err := call(creds, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(out.Arn); got != "arn:aws:sts::000000000000:assumed-role/fleetq-dev-demo-worker/i-local-demo-0001" || aws.ToString(out.Account) != localaws.LocalAccount {
		t.Fatalf("caller %s of %s", got, aws.ToString(out.Account))
	}
	wrongSecret, unknown, noToken := creds, creds, creds
	wrongSecret.SecretAccessKey = "x" + creds.SecretAccessKey[1:]
	unknown.AccessKeyID = "ASIANEVERISSUED"
	noToken.SessionToken = ""
	for name, c := range map[string]struct {
		creds aws.Credentials
		skew  time.Duration
		code  string
	}{
		"wrong secret":   {wrongSecret, 0, "SignatureDoesNotMatch"},
		"unknown key":    {unknown, 0, "InvalidClientTokenId"},
		"no token":       {noToken, 0, "InvalidClientTokenId"},
		"20 minutes off": {creds, 20 * time.Minute, "SignatureDoesNotMatch"},
	} {
		_, err := call(c.creds, c.skew)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
}
