package interruption_test

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// poolYAML is cfgYAML with a Spot pool for fleet gpu.
const poolYAML = cfgYAML + `    max_instances: 4
    spot_pool:
      size: 3
      pairs:
        - {instance_type: g5.xlarge, zone: us-east-1a}
        - {instance_type: g5.xlarge, zone: us-east-1b}
        - {instance_type: g5.xlarge, zone: us-east-1c}
`

// A Spot warning for a running pool instance is handled as for a group
// instance — its worker drained, its lease requeued without an attempt —
// and the instance is marked interrupted in the pool, so no start claims
// it; a warning for an instance of no pool marks nothing.
func TestSpotWarningOnAPoolInstanceMarksItInterrupted(t *testing.T) {
	t.Parallel()
	e := newBaseEnv(t, poolYAML, clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)),
		clock.NewFake(time.Date(2026, 11, 22, 12, 34, 0, 0, time.UTC)), waitingHook)
	e.auth = e.register("w1", instance, 1)
	if err := e.sys.Store.AddPoolInstance(e.ctx, "gpu", scaling.PoolInstance{ID: instance,
		Pair: scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, State: scaling.PoolRunning}); err != nil {
		t.Fatal(err)
	}
	e.leased("j1")
	s := e.handle(sample(t, "ec2-spot-interruption-warning.json"))
	if !s.Drained || s.Requeued != 1 || !s.PoolInterrupted {
		t.Fatalf("summary %+v: want drained, requeued and the pool instance marked", s)
	}
	if j := e.job("j1"); j.Status != job.Queued || j.Attempts != 0 {
		t.Fatalf("job %s, attempts %d", j.Status, j.Attempts)
	}
	p, found, err := e.sys.Store.PoolInstanceOf(e.ctx, "gpu", instance)
	if err != nil || !found || p.State != scaling.PoolInterrupted {
		t.Fatalf("pool instance %+v (%v, %v): want interrupted", p, found, err)
	}

	// The same warning for a group instance (no pool record) marks nothing.
	g := newEnv(t)
	g.leased("j1")
	if s := g.handle(sample(t, "ec2-spot-interruption-warning.json")); !s.Drained || s.PoolInterrupted {
		t.Fatalf("group instance: summary %+v", s)
	}
}
