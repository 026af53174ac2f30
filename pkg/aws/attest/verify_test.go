package attest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// groups is the Auto Scaling view of the test: instance → group, state.
type groups map[string][2]string

func (g groups) InstanceGroup(_ context.Context, id string) (string, string, error) {
	m := g[id]
	return m[0], m[1], nil
}

type harness struct {
	sts   *localaws.STS
	clock *clock.Fake
	v     *attest.Verifier
	asg   groups
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	sts, err := localaws.StartSTS("", clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sts.Close() })
	h := &harness{sts: sts, clock: clk, asg: groups{
		"i-0aaa": {"fleetq-dev-video", "InService"},
		"i-0bbb": {"fleetq-dev-audio", "InService"},
		"i-0ccc": {"fleetq-dev-video-od", "Pending"},
		"i-0ddd": {"fleetq-dev-video", "Terminating:Wait"},
	}}
	h.v, err = attest.NewVerifier(sts.URL, h.asg, attest.Config{ServerID: "dev", Clock: clk, Fleets: map[string]attest.Fleet{
		"video": {RoleARN: localaws.RoleARN("fleetq-dev-video-worker"), Groups: []string{"fleetq-dev-video", "fleetq-dev-video-od"}},
		"audio": {RoleARN: localaws.RoleARN("fleetq-dev-audio-worker"), Groups: []string{"fleetq-dev-audio"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sign is what the agent on instance of role does.
func (h *harness) sign(t *testing.T, role, instance, serverID string) *wire.AWSIdentity {
	t.Helper()
	creds := h.sts.Issue(localaws.STSCaller{Role: role, Session: instance})
	id, err := attest.Sign(context.Background(), credentials.StaticCredentialsProvider{Value: creds}, h.sts.URL, "us-east-1", serverID, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestVerifyAcceptsTheFleetsOwnInstance(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ instance, group string }{{"i-0aaa", "fleetq-dev-video"}, {"i-0ccc", "fleetq-dev-video-od"}} {
		id := h.sign(t, "fleetq-dev-video-worker", c.instance, "dev")
		got, err := h.v.Verify(context.Background(), id)
		if err != nil {
			t.Fatalf("%s: %v", c.instance, err)
		}
		if got.Fleet != "video" || got.InstanceID != c.instance || got.Role != "fleetq-dev-video-worker" || got.Account != localaws.LocalAccount || got.Group != c.group {
			t.Fatalf("%s: identity %+v", c.instance, got)
		}
		for k := range id.Headers {
			if v := id.Headers[k]; strings.Contains(v, "Secret") {
				t.Fatalf("header %s carries %q", k, v)
			}
		}
	}
}

// The fleet is the role's: audio's instance proves fleet audio whatever
// it claims, and a role on an instance of another fleet's group, or a role
// of no fleet, proves nothing.
func TestVerifyRefusesAnotherFleetsInstance(t *testing.T) {
	h := newHarness(t)
	id := h.sign(t, "fleetq-dev-audio-worker", "i-0bbb", "dev")
	if got, err := h.v.Verify(context.Background(), id); err != nil || got.Fleet != "audio" {
		t.Fatalf("audio's instance: %+v, %v; want fleet audio", got, err)
	}
	// The video role on an instance of audio's group (a stolen
	// credential used elsewhere) is not in video's groups either.
	id = h.sign(t, "fleetq-dev-video-worker", "i-0bbb", "dev")
	if _, err := h.v.Verify(context.Background(), id); !errors.Is(err, attest.ErrDenied) {
		t.Fatalf("video's role on audio's instance: %v, want ErrDenied", err)
	}
	// Audio's role on an instance of video's group.
	id = h.sign(t, "fleetq-dev-audio-worker", "i-0aaa", "dev")
	if _, err := h.v.Verify(context.Background(), id); !errors.Is(err, attest.ErrDenied) {
		t.Fatalf("audio's role on video's instance: %v, want ErrDenied", err)
	}
	id = h.sign(t, "someone-elses-role", "i-0aaa", "dev")
	if _, err := h.v.Verify(context.Background(), id); !errors.Is(err, attest.ErrDenied) || !strings.Contains(err.Error(), "no fleet's worker role") {
		t.Fatalf("a role of no fleet: %v, want ErrDenied for the role", err)
	}
}

func TestVerifyRefusesAnInstanceNotInService(t *testing.T) {
	h := newHarness(t)
	for _, instance := range []string{"i-0ddd", "i-0eee"} { // terminating; in no group
		id := h.sign(t, "fleetq-dev-video-worker", instance, "dev")
		_, err := h.v.Verify(context.Background(), id)
		if !errors.Is(err, attest.ErrDenied) || !strings.Contains(err.Error(), "not in service") {
			t.Fatalf("%s: %v, want ErrDenied", instance, err)
		}
	}
}

func TestVerifyRefusesAReplayLaterOrForAnotherStage(t *testing.T) {
	h := newHarness(t)
	id := h.sign(t, "fleetq-dev-video-worker", "i-0aaa", "dev")
	h.clock.Advance(5*time.Minute + time.Second)
	if _, err := h.v.Verify(context.Background(), id); !errors.Is(err, attest.ErrUnauthenticated) {
		t.Fatalf("replayed after 5m: %v, want ErrUnauthenticated", err)
	}
	prod := h.sign(t, "fleetq-dev-video-worker", "i-0aaa", "prod")
	if _, err := h.v.Verify(context.Background(), prod); !errors.Is(err, attest.ErrUnauthenticated) {
		t.Fatalf("signed for prod: %v, want ErrUnauthenticated", err)
	}
	// The server id rewritten after signing: STS finds the signature wrong.
	prod.Headers[wire.HeaderServerID] = "dev"
	calls := h.sts.Calls()
	_, err := h.v.Verify(context.Background(), prod)
	if !errors.Is(err, attest.ErrUnauthenticated) || !strings.Contains(err.Error(), "SignatureDoesNotMatch") || h.sts.Calls() != calls+1 {
		t.Fatalf("server id rewritten: %v, want STS's SignatureDoesNotMatch", err)
	}
}

func TestVerifyRefusesATamperedSignature(t *testing.T) {
	h := newHarness(t)
	id := h.sign(t, "fleetq-dev-video-worker", "i-0aaa", "dev")
	authz := id.Headers["Authorization"]
	last := authz[len(authz)-1:]
	flip := map[string]string{"0": "1"}[last]
	if flip == "" {
		flip = "0"
	}
	id.Headers["Authorization"] = authz[:len(authz)-1] + flip
	_, err := h.v.Verify(context.Background(), id)
	if !errors.Is(err, attest.ErrUnauthenticated) || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("tampered signature: %v", err)
	}
	// Credentials STS never issued.
	forged, _ := attest.Sign(context.Background(), credentials.NewStaticCredentialsProvider("ASIAFORGED", "secret", "token"), h.sts.URL, "us-east-1", "dev", h.clock.Now())
	if _, err := h.v.Verify(context.Background(), forged); !errors.Is(err, attest.ErrUnauthenticated) || !strings.Contains(err.Error(), "InvalidClientTokenId") {
		t.Fatalf("forged credentials: %v", err)
	}
}

// The identity request goes to the configured STS endpoint only: a URL of
// the caller's choosing, another action, an unsigned server id or a
// missing date are refused before anything is sent.
func TestVerifyRefusesMalformedRequestsWithoutForwarding(t *testing.T) {
	h := newHarness(t)
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	cases := map[string]func(id *wire.AWSIdentity){
		"another URL":    func(id *wire.AWSIdentity) { id.URL = other.URL },
		"a path":         func(id *wire.AWSIdentity) { id.URL = h.sts.URL + "/x" },
		"a query":        func(id *wire.AWSIdentity) { id.URL = h.sts.URL + "/?Action=AssumeRole" },
		"GET":            func(id *wire.AWSIdentity) { id.Method = "GET" },
		"another action": func(id *wire.AWSIdentity) { id.Body = "Action=AssumeRole&Version=2011-06-15" },
		"an extra param": func(id *wire.AWSIdentity) { id.Body += "&RoleArn=x" },
		"no date":        func(id *wire.AWSIdentity) { delete(id.Headers, "X-Amz-Date") },
		"no server id":   func(id *wire.AWSIdentity) { delete(id.Headers, wire.HeaderServerID) },
		"no signature":   func(id *wire.AWSIdentity) { delete(id.Headers, "Authorization") },
		"unsigned server": func(id *wire.AWSIdentity) {
			id.Headers["Authorization"] = strings.Replace(id.Headers["Authorization"], ";x-fleetq-server-id", "", 1)
		},
	}
	for name, mutate := range cases {
		id := h.sign(t, "fleetq-dev-video-worker", "i-0aaa", "dev")
		mutate(id)
		calls := h.sts.Calls()
		if _, err := h.v.Verify(context.Background(), id); !errors.Is(err, attest.ErrUnauthenticated) {
			t.Errorf("%s: %v, want ErrUnauthenticated", name, err)
		}
		if h.sts.Calls() != calls {
			t.Errorf("%s: forwarded to STS", name)
		}
	}
	if elsewhere.Load() != 0 {
		t.Fatal("a request reached a URL the caller chose")
	}
	if _, err := h.v.Verify(context.Background(), nil); !errors.Is(err, attest.ErrUnauthenticated) {
		t.Fatalf("no identity: %v", err)
	}
}

func TestNewVerifierChecksItsConfig(t *testing.T) {
	g := groups{}
	for name, c := range map[string]struct {
		url string
		cfg attest.Config
	}{
		"bad endpoint": {"ftp://x", attest.Config{ServerID: "dev"}},
		"no server id": {"https://sts.us-east-1.amazonaws.com/", attest.Config{}},
		"bad role":     {"https://sts.us-east-1.amazonaws.com/", attest.Config{ServerID: "dev", Fleets: map[string]attest.Fleet{"a": {RoleARN: "role", Groups: []string{"g"}}}}},
		"no group":     {"https://sts.us-east-1.amazonaws.com/", attest.Config{ServerID: "dev", Fleets: map[string]attest.Fleet{"a": {RoleARN: "arn:aws:iam::1:role/r"}}}},
		"shared role": {"https://sts.us-east-1.amazonaws.com/", attest.Config{ServerID: "dev", Fleets: map[string]attest.Fleet{
			"a": {RoleARN: "arn:aws:iam::1:role/r", Groups: []string{"g"}}, "b": {RoleARN: "arn:aws:iam::1:role/path/r", Groups: []string{"h"}}}}},
	} {
		if _, err := attest.NewVerifier(c.url, g, c.cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if attest.RegionalEndpoint("eu-west-1") != "https://sts.eu-west-1.amazonaws.com/" {
		t.Fatal(attest.RegionalEndpoint("eu-west-1"))
	}
	_ = aws.String
}
