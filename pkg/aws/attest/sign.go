package attest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// IdentityBody is the body of every identity request: the Query API's
// GetCallerIdentity, and nothing else.
const IdentityBody = "Action=GetCallerIdentity&Version=2011-06-15"

const formType = "application/x-www-form-urlencoded; charset=utf-8"

// RegionalEndpoint is STS's endpoint in region, where a stage's API and its
// workers both send identity requests.
func RegionalEndpoint(region string) string {
	return "https://sts." + region + ".amazonaws.com/"
}

// Sign returns a GetCallerIdentity request for the STS endpoint, signed at
// now with creds (Signature Version 4, service sts, region) and carrying
// serverID in the signed X-Fleetq-Server-Id header. It holds the signature,
// the date and the session token, never the secret key.
func Sign(ctx context.Context, creds aws.CredentialsProvider, endpoint, region, serverID string, now time.Time) (*wire.AWSIdentity, error) {
	if creds == nil {
		return nil, fmt.Errorf("sign the identity request: no AWS credentials")
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("sign the identity request: AWS credentials: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(IdentityBody))
	if err != nil {
		return nil, fmt.Errorf("sign the identity request: STS endpoint %q: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", formType)
	req.Header.Set(wire.HeaderServerID, serverID)
	sum := sha256.Sum256([]byte(IdentityBody))
	if err := v4.NewSigner().SignHTTP(ctx, c, req, hex.EncodeToString(sum[:]), "sts", region, now.UTC()); err != nil {
		return nil, fmt.Errorf("sign the identity request: %w", err)
	}
	id := &wire.AWSIdentity{Method: req.Method, URL: req.URL.String(), Body: IdentityBody, Headers: map[string]string{}}
	for k := range req.Header {
		id.Headers[k] = req.Header.Get(k)
	}
	return id, nil
}
