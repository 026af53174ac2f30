package scaler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localfleet"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
)

var t0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

const cfgYAML = `
stage: test
fleets:
  - slug: gpu
    workflows: [render]
    instance_types: [g5.xlarge]
    slots_per_instance: 2
    max_instances: 5
    idle_window: 15m
    scale_in_grace: 2m
    boot_timeout: 10m
    lease_seconds: 600
    heartbeat_seconds: 30
`

type harness struct {
	t       *testing.T
	ctx     context.Context
	clock   *clock.Fake
	sys     *system.Env
	fleet   *localfleet.Fleet
	sc      *scaler.Scaler
	scfg    scaler.Config
	waker   *scaler.Waker
	metrics *bytes.Buffer

	mu      sync.Mutex
	workers map[string]worker.Auth // by instance id
	// register is false for instances that boot but never register.
	register bool
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, cfgYAML)
}

func newHarnessWith(t *testing.T, config string) *harness {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	client, table := testenv.DynamoDB(t)
	clk := clock.NewFake(t0)
	log := slog.New(slog.DiscardHandler)
	h := &harness{t: t, ctx: context.Background(), clock: clk, workers: map[string]worker.Auth{}, register: true, metrics: &bytes.Buffer{}}
	if h.sys, err = system.New(cfg, client, table, clk, log, nil, system.LeaseSpread(1)); err != nil {
		t.Fatal(err)
	}
	h.fleet = localfleet.New(h.ctx, localfleet.Options{Clock: clk, BootDelay: 3 * time.Minute, Launch: h.launch})
	h.scfg = scaler.Config{Capacity: h.fleet, Stage: "test", Metrics: h.metrics}
	h.sc = h.scalerOn(h.sys.Store)

	if h.waker, err = scaler.NewWaker(h.sys.Store.Config(), h.sys.Store, h.fleet, log); err != nil {
		t.Fatal(err)
	}
	return h
}

// configure changes the scaler's settings and builds it again.
func (h *harness) configure(change func(*scaler.Config)) {
	h.t.Helper()
	change(&h.scfg)
	h.sc = h.scalerOn(h.sys.Store)
}

// scalerOn builds a scaler with the harness's settings on st.
func (h *harness) scalerOn(st scaler.Store) *scaler.Scaler {
	h.t.Helper()
	sc, err := scaler.New(h.sys.Store.Config(), st, h.clock, slog.New(slog.DiscardHandler), h.scfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return sc
}

// machine is a booted instance in these tests; its worker's jobs are
// driven by the test through the store.
type machine struct{}

func (machine) Stop()        {}
func (machine) Running() int { return 0 }

// launch plays the agent of a booted instance: it registers a worker.
func (h *harness) launch(ctx context.Context, fleet, instanceID string) localfleet.Machine {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.register {
		return machine{}
	}
	a := worker.Auth{WorkerID: "w-" + instanceID, Fleet: fleet, TokenHash: "hash-" + instanceID}
	if _, err := h.sys.Store.RegisterWorker(ctx, worker.Registration{WorkerID: a.WorkerID, Fleet: fleet, Stage: "test",
		InstanceID: instanceID, MaxConcurrency: 2, TokenHash: a.TokenHash}); err != nil {
		h.t.Errorf("register %s: %v", instanceID, err)
	}
	h.workers[instanceID] = a
	return machine{}
}

func (h *harness) submit(n int, prefix string) {
	h.t.Helper()
	for i := range n {
		id := prefix + string(rune('a'+i))
		if _, _, err := h.sys.Store.CreateJob(h.ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.fleet.Step(h.ctx, d)
}

func (h *harness) tick() scaler.FleetReport {
	h.t.Helper()
	reports, err := h.sc.Tick(h.ctx)
	if err != nil || len(reports) != 1 {
		h.t.Fatalf("tick: %v (%d reports)", err, len(reports))
	}
	// What the tick reports is what it recorded, word for word.
	r := reports[0]
	st, err := h.sys.Store.GetFleetState(h.ctx, r.Fleet)
	if err != nil || st.LastDecision == nil || st.LastDecision.Reason != r.Reason || r.Reason.String() == "" {
		h.t.Fatalf("tick reported reason %q, recorded %+v (%v)", r.Reason, st.LastDecision, err)
	}
	return r
}

// leaseAll has every registered worker lease what it can; it answers the
// leases taken, by job id.
func (h *harness) leaseAll() map[string]leaseRef {
	h.t.Helper()
	out := map[string]leaseRef{}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.workers {
		for range 2 {
			j, err := h.sys.Store.LeaseNext(h.ctx, a, []string{"render"})
			if err != nil {
				break
			}
			out[j.ID] = leaseRef{a, j.LeaseToken}
		}
	}
	return out
}

type leaseRef struct {
	a     worker.Auth
	token string
}

func (h *harness) heartbeat(leases map[string]leaseRef) {
	h.t.Helper()
	for id, l := range leases {
		if _, err := h.sys.Store.Heartbeat(h.ctx, l.a, id, l.token, nil); err != nil {
			h.t.Fatalf("heartbeat %s: %v", id, err)
		}
	}
}

// A burst wakes the fleet, the busy fleet holds while its jobs run past
// the idle window, and it goes back to zero once they are done. With four
// shards the same holds: the ticks see the leases and the workers in every
// shard of the fleet's partitions (here the three workers are filed in
// shards 1 to 3 and the six leases in all four), so a busy worker is never
// taken for an idle one.
func TestBurstFromZeroScalesUpAndBackToZero(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, config string }{{"one_shard", cfgYAML}, {"four_shards", cfgYAML + "    ready_shards: 4\n"}} {
		t.Run(c.name, func(t *testing.T) { burstFromZero(t, newHarnessWith(t, c.config)) })
	}
}

func burstFromZero(t *testing.T, h *harness) {
	h.submit(6, "j")
	if err := h.waker.Wake(h.ctx, "gpu", 6); err != nil {
		t.Fatal(err)
	}
	g, _ := h.fleet.Describe(h.ctx, "gpu")
	if g.Desired != 3 || len(g.Instances) != 3 {
		t.Fatalf("woken group %+v, want 3 booting", g)
	}
	// The tick counts the booting instances: no second launch for the same work.
	r := h.tick()
	if r.Desired != 3 || h.fleet.Stats().Launched != 3 || !strings.HasPrefix(r.Decision.Reason.String(), "hold 3") {
		t.Fatalf("tick while booting: desired %d, launched %d, reason %q", r.Desired, h.fleet.Stats().Launched, r.Decision.Reason)
	}
	h.advance(3 * time.Minute)
	leases := h.leaseAll()
	if len(leases) != 6 {
		t.Fatalf("leased %d of 6", len(leases))
	}
	for range 20 { // jobs run 20 minutes, past the idle window
		h.advance(time.Minute)
		h.heartbeat(leases)
		if r := h.tick(); r.Desired != 3 || len(r.Terminated) != 0 {
			t.Fatalf("busy fleet: desired %d terminated %v (%s)", r.Desired, r.Terminated, r.Decision.Reason)
		}
	}
	for id, l := range leases {
		if err := h.sys.Store.Complete(h.ctx, l.a, id, l.token, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.advance(time.Minute)
	if r := h.tick(); r.Desired != 3 || !strings.Contains(r.Decision.Reason.String(), "idle window") {
		t.Fatalf("within the idle window: desired %d (%s)", r.Desired, r.Decision.Reason)
	}
	h.advance(15 * time.Minute)
	r = h.tick()
	if r.Desired != 0 || len(r.Terminated) != 3 {
		t.Fatalf("after the idle window: desired %d, terminated %v (%s)", r.Desired, r.Terminated, r.Decision.Reason)
	}
	g, _ = h.fleet.Describe(h.ctx, "gpu")
	ws, _ := h.sys.Store.ListWorkers(h.ctx, "gpu")
	if g.Desired != 0 || len(g.Instances) != 0 || len(ws) != 0 {
		t.Fatalf("after scale-in: group %+v, %d workers left", g, len(ws))
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil || st.LastDecision == nil || !strings.HasPrefix(st.LastDecision.Reason.String(), "shrink 3→0") || len(st.History) < 2 {
		t.Fatalf("recorded state %+v, %v", st, err)
	}
	// From zero again, a new job wakes the fleet at once.
	h.submit(1, "k")
	if err := h.waker.Wake(h.ctx, "gpu", 1); err != nil {
		t.Fatal(err)
	}
	if g, _ := h.fleet.Describe(h.ctx, "gpu"); g.Desired != 1 {
		t.Fatalf("second wake: desired %d", g.Desired)
	}
}

func TestTickGrowsWithBacklogAndNeverPastMax(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.submit(3, "a")
	r := h.tick()
	if r.Desired != 2 || !strings.HasPrefix(r.Decision.Reason.String(), "grow 0→2") {
		t.Fatalf("first tick: desired %d (%s)", r.Desired, r.Decision.Reason)
	}
	h.submit(20, "b")
	if r := h.tick(); r.Desired != 5 {
		t.Fatalf("capped: desired %d (%s)", r.Desired, r.Decision.Reason)
	}
}

func TestInstanceThatNeverRegistersIsReplaced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.register = false
	h.submit(1, "a")
	h.tick()               // launches
	h.advance(time.Minute) // the next tick first sees the instance
	h.tick()
	h.advance(10 * time.Minute)
	h.register = true
	r := h.tick()
	if len(r.Terminated) != 1 || r.Desired != 1 || !strings.Contains(r.Decision.Reason.String(), "never registered") {
		t.Fatalf("unhealthy: terminated %v desired %d (%s)", r.Terminated, r.Desired, r.Decision.Reason)
	}
	if s := h.fleet.Stats(); s.Launched != 2 || s.Terminated != 1 {
		t.Fatalf("fleet stats %+v", s)
	}
}

func TestTickRecordsMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.submit(3, "a")
	h.tick()
	lines := strings.Split(strings.TrimSpace(h.metrics.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one EMF line per fleet per tick, got %q", lines)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatalf("metrics line %q: %v", lines[0], err)
	}
	if doc["FleetSlug"] != "gpu" || doc["Stage"] != "test" || doc["QueueDepth"] != float64(3) || doc["DesiredCapacity"] != float64(2) ||
		doc["Queued"] != float64(3) || doc["OldestQueuedAgeSeconds"] != float64(0) {
		t.Fatalf("metrics %v", doc)
	}
	aws := doc["_aws"].(map[string]any)
	defs := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if defs["Namespace"] != "fleetq" || len(defs["Metrics"].([]any)) != 14 {
		t.Fatalf("EMF directive %v", defs)
	}
}
