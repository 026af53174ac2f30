package auth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func TestWorkerTokenRoundTrip(t *testing.T) {
	tok, minted := NewWorkerToken("video-a10g", "i-0abc.def")
	got, err := ParseWorkerToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got != minted || got.Fleet != "video-a10g" || got.WorkerID != "i-0abc.def" || len(got.Hash) != 64 {
		t.Fatalf("parsed %+v, minted %+v", got, minted)
	}
	if strings.Contains(got.Hash, tok) || got.Hash == tok {
		t.Fatal("the digest must not contain the token")
	}
	other, _ := NewWorkerToken("video-a10g", "i-0abc.def")
	if other == tok {
		t.Fatal("two tokens for the same worker are equal")
	}
	secret := strings.Split(tok, ".")[3]
	if raw, _ := b64.DecodeString(secret); len(raw) != 32 {
		t.Fatalf("secret has %d bytes, want 32 (256 bits)", len(raw))
	}
}

func TestParseWorkerTokenRejectsGarbage(t *testing.T) {
	good, _ := NewWorkerToken("f", "w")
	parts := strings.Split(good, ".")
	for _, bad := range []string{
		"", "fqw1", "Bearer x", "fqw2." + strings.Join(parts[1:], "."),
		strings.Join(parts[:3], "."), good + ".x",
		"fqw1.." + parts[2] + "." + parts[3],
		"fqw1." + parts[1] + "." + parts[2] + ".c2hvcnQ",
		"fqw1.!!." + parts[2] + "." + parts[3],
	} {
		if _, err := ParseWorkerToken(bad); err != ErrMalformedToken {
			t.Errorf("ParseWorkerToken(%q) = %v", bad, err)
		}
	}
}

func TestEqual(t *testing.T) {
	if !Equal("s3cret", "s3cret") || Equal("s3cret", "s3creT") || Equal("s3cret", "s3cret ") || Equal("", "") {
		t.Fatal("Equal is wrong")
	}
}

func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Bearer ": "", "Basic abc": "", "": ""} {
		got, ok := BearerToken(h)
		if got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %v", h, got, ok)
		}
	}
}

// ssmServer answers GetParameter over SSM's JSON protocol.
func ssmServer(t *testing.T, value *atomic.Value, calls *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" {
			http.Error(w, "unexpected target", 400)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var in struct {
			Name           string
			WithDecryption bool
		}
		_ = json.Unmarshal(body, &in)
		if !in.WithDecryption {
			http.Error(w, `{"__type":"ValidationException","message":"want decryption"}`, 400)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "SecureString", "Value": value.Load().(string)}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSSMSecretIsCachedForTTL(t *testing.T) {
	var value atomic.Value
	value.Store("first")
	var calls atomic.Int64
	url := ssmServer(t, &value, &calls)
	client := ssm.NewFromConfig(awsenv.Static(""), func(o *ssm.Options) { o.BaseEndpoint = aws.String(url) })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := &SSMSecret{Client: client, Name: "/fleetq/dev/fleet-secret", TTL: time.Minute, Clock: clk}
	ctx := context.Background()
	for range 3 {
		if s, err := src.FleetSecret(ctx); err != nil || s != "first" {
			t.Fatalf("FleetSecret = %q, %v", s, err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("SSM read %d times within the TTL, want 1", calls.Load())
	}
	value.Store("rotated")
	clk.Advance(time.Minute)
	if s, _ := src.FleetSecret(ctx); s != "rotated" || calls.Load() != 2 {
		t.Fatalf("after the TTL: %q with %d reads", s, calls.Load())
	}
}

func TestIAMOperatorNeedsAnIAMIdentity(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := IAMOperator{}.AuthenticateOperator(r)
		if err != nil {
			w.WriteHeader(401)
			return
		}
		_, _ = io.WriteString(w, who)
	})
	adapter := httpadapter.NewV2(h)
	req := events.APIGatewayV2HTTPRequest{RawPath: "/api/admin/fleets", RequestContext: events.APIGatewayV2HTTPRequestContext{
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/api/admin/fleets"},
	}}
	res, err := adapter.ProxyWithContext(context.Background(), req)
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("without IAM: %d %v", res.StatusCode, err)
	}
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccessKey: "AKIA", AccountID: "123456789012", UserARN: "arn:aws:iam::123456789012:user/ops"},
	}
	res, err = adapter.ProxyWithContext(context.Background(), req)
	if err != nil || res.StatusCode != 200 || res.Body != "arn:aws:iam::123456789012:user/ops" {
		t.Fatalf("with IAM: %d %q %v", res.StatusCode, res.Body, err)
	}
}

func TestOperatorToken(t *testing.T) {
	r := httptest.NewRequest("GET", "/api/admin/fleets", nil)
	if _, err := OperatorToken("op").AuthenticateOperator(r); err == nil {
		t.Fatal("no header accepted")
	}
	r.Header.Set("Authorization", "Bearer nope")
	if _, err := OperatorToken("op").AuthenticateOperator(r); err == nil {
		t.Fatal("wrong token accepted")
	}
	r.Header.Set("Authorization", "Bearer op")
	if _, err := OperatorToken("op").AuthenticateOperator(r); err != nil {
		t.Fatal(err)
	}
}

// The Secrets Manager source, through the real SDK client against the local
// JSON API: one read per TTL, a rotated value after it, and a missing
// secret's error named.
func TestSecretsManagerSecretIsCachedForTTL(t *testing.T) {
	srv, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:FleetSecret-AbCdEf"
	srv.PutSecretValue(arn, "first")
	var calls atomic.Int64
	client := secretsmanager.NewFromConfig(awsenv.Static(""), func(o *secretsmanager.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.APIOptions = append(o.APIOptions, awsenv.CountRequests(&calls))
	})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := &SecretsManagerSecret{Client: client, ID: arn, TTL: time.Minute, Clock: clk}
	ctx := context.Background()
	for range 3 {
		if s, err := src.FleetSecret(ctx); err != nil || s != "first" {
			t.Fatalf("FleetSecret = %q, %v", s, err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("Secrets Manager read %d times within the TTL, want 1", calls.Load())
	}
	srv.PutSecretValue(arn, "rotated")
	clk.Advance(59 * time.Second)
	if s, _ := src.FleetSecret(ctx); s != "first" {
		t.Fatalf("within the TTL: %q", s)
	}
	clk.Advance(time.Second)
	if s, _ := src.FleetSecret(ctx); s != "rotated" || calls.Load() != 2 {
		t.Fatalf("after the TTL: %q with %d reads", s, calls.Load())
	}

	missing := &SecretsManagerSecret{Client: client, ID: "nope", Clock: clk}
	if _, err := missing.FleetSecret(ctx); err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("missing secret: %v", err)
	}
}

func TestAPIKeyRoundTrip(t *testing.T) {
	key, minted := NewAPIKey()
	if !strings.HasPrefix(key, APIKeyPrefix) || !ValidAPIKeyID(minted.ID) || len(minted.Hash) != 64 || strings.Contains(key, minted.Hash) {
		t.Fatalf("minted %q as %+v", key, minted)
	}
	got, err := ParseAPIKey(key)
	if err != nil || got != minted {
		t.Fatalf("ParseAPIKey = %+v, %v; want %+v", got, err, minted)
	}
	other, again := NewAPIKey()
	if other == key || again.ID == minted.ID {
		t.Fatal("two keys share a key or an id")
	}
	id, secret, _ := strings.Cut(strings.TrimPrefix(key, APIKeyPrefix), ".")
	for _, bad := range []string{"", "fqk1", key + "x", APIKeyPrefix + id, APIKeyPrefix + id + ".", APIKeyPrefix + strings.ToUpper(id) + "." + secret,
		"fqk2." + id + "." + secret, APIKeyPrefix + id + "." + secret[:10], APIKeyPrefix + id + "x." + secret} {
		if _, err := ParseAPIKey(bad); err != ErrMalformedAPIKey {
			t.Errorf("ParseAPIKey(%q) = %v", bad, err)
		}
	}
}
