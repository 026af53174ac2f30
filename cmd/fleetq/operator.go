//go:build !agent

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// operatorClient calls the producer and operator routes: with a bearer
// token (the dev stack), or signed with SigV4 for API Gateway's IAM
// authorization (a deployed stage) from the default AWS credentials.
type operatorClient struct {
	api, token, apiKey, region string
	http                       *http.Client
}

func operatorFlags(fs *flag.FlagSet) *operatorClient {
	c := &operatorClient{http: &http.Client{Timeout: 30 * time.Second}}
	fs.StringVar(&c.api, "api", env("API", "http://127.0.0.1:8080"), "fleetq API URL (env FLEETQ_API)")
	fs.StringVar(&c.token, "operator-token", env("OPERATOR_TOKEN", ""), "operator bearer token of the dev stack (env FLEETQ_OPERATOR_TOKEN); empty: sign with AWS credentials (SigV4)")
	fs.StringVar(&c.apiKey, "api-key", env("API_KEY", ""), "a tenant's API key (env FLEETQ_API_KEY): acts for its tenant on the producer routes (jobs submit, get, wait, cancel, logs)")
	fs.StringVar(&c.region, "region", os.Getenv("AWS_REGION"), "AWS region of the API for SigV4 signing (env AWS_REGION)")
	return c
}

// get fetches path and decodes the JSON answer into out; an error answer
// becomes an error wrapping its *wire.Error.
func (c *operatorClient) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.api, "/")+path, nil)
	if err != nil {
		return err
	}
	if err := c.authorize(ctx, req, nil); err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %w", req.Method, path, wire.ReadError(res))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

func (c *operatorClient) authorize(ctx context.Context, req *http.Request, body []byte) error {
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		return nil
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
		return nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("no --operator-token and no AWS configuration to sign with: %w", err)
	}
	region := c.region
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return fmt.Errorf("no --operator-token, and SigV4 signing needs a region (--region or AWS_REGION)")
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("no --operator-token and no AWS credentials to sign with: %w", err)
	}
	sum := sha256.Sum256(body)
	return v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", region, time.Now())
}
