package attest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// pool is the Spot pools' records of the test: fleet/instance → state.
type pool struct {
	states map[string]scaling.PoolState
	reads  atomic.Int64
}

func (p *pool) PoolInstanceOf(_ context.Context, fleet, id string) (scaling.PoolInstance, bool, error) {
	p.reads.Add(1)
	st, ok := p.states[fleet+"/"+id]
	return scaling.PoolInstance{ID: id, State: st, Since: poolSince}, ok, nil
}

// poolSince is every pool record's time of its state.
var poolSince = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// newPoolHarness is newHarness's groups with a Spot pool for video and
// audio (none for music), outside the groups.
func newPoolHarness(t *testing.T) (*harness, *pool) {
	t.Helper()
	h := newHarness(t)
	p := &pool{states: map[string]scaling.PoolState{
		"video/i-p-start": scaling.PoolStarting,
		"video/i-p-run":   scaling.PoolRunning,
		"video/i-p-stop":  scaling.PoolStopped,
		"video/i-p-stopg": scaling.PoolStopping,
		"video/i-p-intr":  scaling.PoolInterrupted,
		"video/i-p-prep":  scaling.PoolPreparing,
		"audio/i-p-audio": scaling.PoolRunning,
		"music/i-p-music": scaling.PoolRunning,
	}}
	var err error
	h.v, err = attest.NewVerifier(h.sts.URL, h.asg, attest.Config{ServerID: "dev", Clock: h.clock, Pool: p, Fleets: map[string]attest.Fleet{
		"video": {RoleARN: localaws.RoleARN("fleetq-dev-video-worker"), Groups: []string{"fleetq-dev-video", "fleetq-dev-video-od"}, SpotPool: true},
		"audio": {RoleARN: localaws.RoleARN("fleetq-dev-audio-worker"), Groups: []string{"fleetq-dev-audio"}, SpotPool: true},
		"music": {RoleARN: localaws.RoleARN("fleetq-dev-music-worker"), Groups: []string{"fleetq-dev-music"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

// A started pool instance registers through the same attestation as a
// group instance: the fleet's role on an instance of its pool that is
// starting or running.
func TestVerifyAcceptsAStartedPoolInstance(t *testing.T) {
	h, _ := newPoolHarness(t)
	for _, c := range []struct{ instance, state string }{{"i-p-start", "starting"}, {"i-p-run", "running"}} {
		got, err := h.v.Verify(context.Background(), h.sign(t, "fleetq-dev-video-worker", c.instance, "dev"))
		if err != nil {
			t.Fatalf("%s: %v", c.instance, err)
		}
		if got.Fleet != "video" || got.InstanceID != c.instance || !got.SpotPool || got.Group != "" || got.State != c.state {
			t.Fatalf("%s: identity %+v", c.instance, got)
		}
		// A starting instance's record tells when the pool started it.
		if want := (c.state == "starting"); got.PoolStartedAt.Equal(poolSince) != want || !want && !got.PoolStartedAt.IsZero() {
			t.Fatalf("%s: started at %s, want the record's %s only while starting", c.instance, got.PoolStartedAt, poolSince)
		}
	}
	// A group instance is still a group instance.
	if got, err := h.v.Verify(context.Background(), h.sign(t, "fleetq-dev-video-worker", "i-0aaa", "dev")); err != nil || got.SpotPool || got.Group != "fleetq-dev-video" {
		t.Fatalf("group instance: %+v, %v", got, err)
	}
}

// A pool instance that is not started (stopped, being stopped, prepared,
// stopped by EC2) proves nothing, nor does one of no pool.
func TestVerifyRefusesAPoolInstanceNotStarted(t *testing.T) {
	h, _ := newPoolHarness(t)
	for _, c := range []struct{ instance, want string }{
		{"i-p-stop", "is stopped"}, {"i-p-stopg", "is stopping"}, {"i-p-prep", "is preparing"}, {"i-p-intr", "is interrupted"},
		{"i-p-none", "nor in its Spot pool"},
	} {
		_, err := h.v.Verify(context.Background(), h.sign(t, "fleetq-dev-video-worker", c.instance, "dev"))
		if !errors.Is(err, attest.ErrDenied) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrDenied: %s", c.instance, err, c.want)
		}
	}
}

// Another fleet's pool instance, with the wrong role or none, is denied:
// the fleet is the role's, and the role's fleet's pool holds no such
// instance. A fleet without a pool never reads one.
func TestVerifyRefusesAnotherFleetsPoolInstance(t *testing.T) {
	h, p := newPoolHarness(t)
	for _, c := range []struct{ role, instance string }{
		{"fleetq-dev-video-worker", "i-p-audio"}, // video's role on audio's pool instance
		{"fleetq-dev-audio-worker", "i-p-run"},   // audio's role on video's pool instance
		{"fleetq-dev-music-worker", "i-p-music"}, // music has no pool, whatever the records hold
	} {
		before := p.reads.Load()
		_, err := h.v.Verify(context.Background(), h.sign(t, c.role, c.instance, "dev"))
		if !errors.Is(err, attest.ErrDenied) {
			t.Errorf("%s on %s: %v, want ErrDenied", c.role, c.instance, err)
		}
		if c.role == "fleetq-dev-music-worker" && p.reads.Load() != before {
			t.Errorf("music has no pool: its instance's verification read the pool")
		}
	}
	// A role of no fleet on a started pool instance.
	if _, err := h.v.Verify(context.Background(), h.sign(t, "someone-elses-role", "i-p-run", "dev")); !errors.Is(err, attest.ErrDenied) || !strings.Contains(err.Error(), "no fleet's worker role") {
		t.Fatalf("a role of no fleet on a pool instance: %v, want ErrDenied", err)
	}
	// Nobody: no identity, or one for another stage.
	if _, err := h.v.Verify(context.Background(), nil); !errors.Is(err, attest.ErrUnauthenticated) {
		t.Fatalf("no identity: %v", err)
	}
	if _, err := h.v.Verify(context.Background(), h.sign(t, "fleetq-dev-video-worker", "i-p-run", "prod")); !errors.Is(err, attest.ErrUnauthenticated) {
		t.Fatalf("signed for prod: %v", err)
	}
}

func TestNewVerifierNeedsAPoolLookupForAFleetWithAPool(t *testing.T) {
	_, err := attest.NewVerifier("https://sts.us-east-1.amazonaws.com/", groups{}, attest.Config{ServerID: "dev", Fleets: map[string]attest.Fleet{
		"a": {RoleARN: "arn:aws:iam::1:role/r", Groups: []string{"g"}, SpotPool: true}}})
	if err == nil || !strings.Contains(err.Error(), "no pool lookup") {
		t.Fatalf("a fleet with a pool and no lookup: %v", err)
	}
}
