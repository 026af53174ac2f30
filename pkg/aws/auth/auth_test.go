package auth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
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
