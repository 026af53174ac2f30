package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// attested is a harness on a fake clock whose local fleets have launched
// an instance each.
type attested struct {
	*harness
	clock     *clock.Fake
	instances map[string]string // fleet → its instance
}

func newAttested(t *testing.T) *attested {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := &attested{harness: newHarness(t, func(o *devstack.Options) { o.Clock = clk }), clock: clk, instances: map[string]string{}}
	ctx := context.Background()
	for _, fleet := range []string{"gpu", "approval"} {
		if err := h.stack.Fleet.SetDesired(ctx, fleet, 1); err != nil {
			t.Fatal(err)
		}
		g, err := h.stack.Fleet.Describe(ctx, fleet)
		if err != nil || len(g.Instances) != 1 {
			t.Fatalf("fleet %s: %+v, %v", fleet, g, err)
		}
		h.instances[fleet] = g.Instances[0].ID
	}
	return h
}

// identity is what the agent on fleet's instance sends, signed for stage.
func (h *attested) identity(fleet, instance, stage string) *wire.AWSIdentity {
	h.t.Helper()
	creds := h.stack.STS.Issue(localaws.STSCaller{Role: devstack.WorkerRole("test", fleet), Session: instance})
	id, err := attest.Sign(context.Background(), credentials.StaticCredentialsProvider{Value: creds}, h.stack.STS.URL, "us-east-1", stage, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

func (h *attested) register(fleet, workerID string, id *wire.AWSIdentity) reply {
	h.t.Helper()
	return h.send("POST", wire.PathRegister, map[string]string{wire.HeaderIdentity: wire.EncodeIdentity(id)},
		map[string]any{"worker_id": workerID, "fleet_slug": fleet, "stage": "test"})
}

func TestAttestedRegistration(t *testing.T) {
	t.Parallel()
	h := newAttested(t)
	gpu := h.instances["gpu"]
	r := h.register("gpu", gpu, h.identity("gpu", gpu, "test"))
	h.want(r, 201, "")
	h.want(h.do("POST", wire.PathPoll, r.body["token"].(string), map[string]any{}), 204, "")
	ws := h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any)
	if len(ws) != 1 || ws[0].(map[string]any)["instance_id"] != gpu {
		t.Fatalf("workers %v: want %s with its attested instance id", ws, gpu)
	}
	// One agent per GPU: the instance's workers are named after it.
	h.want(h.register("gpu", gpu+"-1", h.identity("gpu", gpu, "test")), 201, "")
}

// Fleet approval's instance cannot register into fleet gpu, neither under
// its own id nor under gpu's instance's.
func TestAttestedRegistrationIntoAnotherFleetIsRefused(t *testing.T) {
	t.Parallel()
	h := newAttested(t)
	other := h.instances["approval"]
	h.want(h.register("gpu", other, h.identity("approval", other, "test")), 403, "permission_denied")
	h.want(h.register("gpu", h.instances["gpu"], h.identity("approval", other, "test")), 403, "permission_denied")
	// Approval's role on gpu's instance: the role is not gpu's.
	h.want(h.register("gpu", h.instances["gpu"], h.identity("approval", h.instances["gpu"], "test")), 403, "permission_denied")
	if ws := h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any); len(ws) != 0 {
		t.Fatalf("workers %v after refused registrations", ws)
	}
}

func TestAttestedRegistrationRefusesReplaysAndOtherStages(t *testing.T) {
	t.Parallel()
	h := newAttested(t)
	gpu := h.instances["gpu"]
	old := h.identity("gpu", gpu, "test")
	h.clock.Advance(6 * time.Minute)
	r := h.register("gpu", gpu, old)
	h.want(r, 401, "unauthenticated")
	if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "sign a fresh one") {
		t.Fatalf("message %q", msg)
	}
	h.want(h.register("gpu", gpu, h.identity("gpu", gpu, "prod")), 401, "unauthenticated")
	tampered := h.identity("gpu", gpu, "test")
	tampered.Headers["Authorization"] = strings.Replace(tampered.Headers["Authorization"], "Signature=", "Signature=00", 1)
	tampered.Headers["Authorization"] = tampered.Headers["Authorization"][:len(tampered.Headers["Authorization"])-2]
	h.want(h.register("gpu", gpu, tampered), 401, "unauthenticated")
	h.want(h.register("gpu", gpu, h.identity("gpu", gpu, "test")), 201, "")
}

func TestAttestedRegistrationNeedsAnInstanceInService(t *testing.T) {
	t.Parallel()
	h := newAttested(t)
	gpu := h.instances["gpu"]
	id := h.identity("gpu", gpu, "test")
	h.want(h.register("gpu", "i-someone-else", id), 403, "permission_denied")
	r := h.send("POST", wire.PathRegister, map[string]string{wire.HeaderIdentity: wire.EncodeIdentity(id)},
		map[string]any{"worker_id": gpu, "instance_id": "i-other", "fleet_slug": "gpu", "stage": "test"})
	h.want(r, 403, "permission_denied")
	if err := h.stack.Fleet.Terminate(context.Background(), "gpu", gpu); err != nil {
		t.Fatal(err)
	}
	h.want(h.register("gpu", gpu, h.identity("gpu", gpu, "test")), 403, "permission_denied")
}

// Secrets are per fleet: gpu's secret does not register into approval, and
// a fleet that accepts no secret refuses every one.
func TestFleetSecretsArePerFleet(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	body := map[string]any{"worker_id": "w1", "fleet_slug": "approval", "stage": "test"}
	r := h.send("POST", wire.PathRegister, map[string]string{wire.HeaderFleetSecret: secretOf("gpu")}, body)
	h.want(r, 401, "unauthenticated")
	h.want(h.send("POST", wire.PathRegister, map[string]string{wire.HeaderFleetSecret: secretOf("approval")}, body), 201, "")
	h.want(h.send("POST", wire.PathRegister, nil, body), 401, "unauthenticated")
}

// A re-registration of an approved worker by another agent key needs
// approval again.
func TestReRegistrationByAnotherAgentNeedsApproval(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, func(o *devstack.Options) { o.Clock = clk })
	reg := func(key string) bool {
		r := h.do("POST", wire.PathRegister, "secret", map[string]any{"worker_id": "w1", "fleet_slug": "approval", "stage": "test", "agent_key": key})
		h.want(r, 201, "")
		return r.body["approved"].(bool)
	}
	if reg("agent-one-key-0123456789") {
		t.Fatal("a new worker of an approval fleet is approved")
	}
	h.want(h.do("POST", "/api/admin/workers/w1/approve", "op", nil), 200, "")
	if !reg("agent-one-key-0123456789") {
		t.Fatal("the approved agent restarting lost its approval")
	}
	clk.Advance(time.Hour)
	if reg("agent-two-key-0123456789") {
		t.Fatal("another agent key inherited the approval")
	}
}

// An instance the attestation finds starting in its fleet's Spot pool
// boots from the pool record's time of the start, not from the time its
// agent reported, and the fleet's timeline shows that phase under its own
// name.
func TestAttestedSpotPoolInstanceBootsFromThePoolStart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, func(o *devstack.Options) {
		o.Clock = clk
		f, _ := o.Config.Fleet("gpu")
		f.SpotPool = fleetconfig.SpotPool{Size: 1, VolumeGB: 60, MaxAgeHours: 168, AvoidMinutes: 15, Pairs: []fleetconfig.SpotPoolPair{
			{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, {InstanceType: "g5.xlarge", Zone: "us-east-1b"}, {InstanceType: "g5.xlarge", Zone: "us-east-1c"}}}
	})
	ctx := context.Background()
	pair := scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}
	id, err := h.stack.Fleet.CreatePoolInstance(ctx, "gpu", pair, 60)
	if err != nil {
		t.Fatal(err)
	}
	started := clk.Now()
	if err := h.stack.Store.AddPoolInstance(ctx, "gpu", scaling.PoolInstance{ID: id, Pair: pair, State: scaling.PoolStarting, Since: started}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	a := &attested{harness: h, clock: clk}
	r := a.send("POST", wire.PathRegister, map[string]string{wire.HeaderIdentity: wire.EncodeIdentity(a.identity("gpu", id, "test"))},
		map[string]any{"worker_id": id, "fleet_slug": "gpu", "stage": "test", "boot": map[string]any{
			"launched_at": started.Add(-time.Minute).Format(time.RFC3339), "from_pool": true, "agent_started_at": started.Add(20 * time.Second).Format(time.RFC3339)}})
	h.want(r, 201, "")
	var boot *wire.FleetBoot
	for _, f := range h.do("GET", "/api/admin/fleets", "op", nil).body["fleets"].([]any) {
		if m := f.(map[string]any); m["fleet_slug"] == "gpu" && m["boot"] != nil {
			b := m["boot"].(map[string]any)
			boot = &wire.FleetBoot{Workers: int(b["workers"].(float64))}
			for _, p := range b["phases"].([]any) {
				p := p.(map[string]any)
				boot.Phases = append(boot.Phases, wire.BootPhase{Name: p["name"].(string), MaxS: p["max_s"].(float64)})
			}
		}
	}
	if boot == nil || boot.Workers != 1 || len(boot.Phases) != 2 || boot.Phases[0].Name != "spot_pool_start_to_agent" || boot.Phases[0].MaxS != 20 {
		t.Fatalf("gpu's boot timeline %+v: want spot_pool_start_to_agent 20 s from the pool's start", boot)
	}
}
