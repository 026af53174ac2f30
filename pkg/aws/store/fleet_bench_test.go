package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// A fleet under load on a lagging index (docs/benchmarks.md, "A fleet of
// 10,000 workers on a lagging index"). The load runs in simulated time on
// the fake clock that also drives the capacity model and the index lag:
// time goes in steps, and everything due within a step runs at once, in
// goroutines, against the embedded server, as concurrent requests reach
// DynamoDB; the polls of one step read the same index state, as polls
// within one DynamoDB round trip do. The benchmark drives only the store's
// public API (CreateJob as dispatch files a submission, LeaseNext as a
// worker polls, Complete), so it measures whatever the lease path does
// inside.

// fleetLoad is one fleet's load.
type fleetLoad struct {
	// rate is the polls a second: each worker whose 1-minute job ends
	// completes it and polls for the next at once (idle: workers with no
	// job poll, and nothing completes). New jobs arrive at the same rate
	// unless noArrivals.
	rate             int
	idle, noArrivals bool
	// burst is how many submissions more arrive within the window's first
	// second; backlog how many jobs are queued (and in the index) before.
	burst, backlog int
	lag            time.Duration
	shards         int
	window         time.Duration
	// step is how long a poll's read and its claim take: polls within a
	// step read the same index state.
	step time.Duration
	// instances is how many warm API processes (each its own Store) the
	// polls go through.
	instances int
}

// config is the fleet's: its leases outlast the setup, which leases the
// running jobs one at a time, the lag apart (no heartbeats in the window).
func (l fleetLoad) config() string {
	return strings.Replace(capacityConfig, "lease_seconds: 600", "lease_seconds: 3600", 1) + fmt.Sprintf("    ready_shards: %d\n", l.shards)
}

// event is work due at a time of the simulated window.
type event struct {
	at time.Duration
	do func() error
}

// runSteps runs the events of a window step by step: everything due within
// a step at once, in goroutines, then the clock moves on by the step.
func runSteps(b *testing.B, clk *clock.Fake, step, window time.Duration, events []event) {
	b.Helper()
	for from := time.Duration(0); from < window; from += step {
		var due []func() error
		for _, e := range events {
			if e.at >= from && e.at < from+step {
				due = append(due, e.do)
			}
		}
		atOnce(b, len(due), func(i int) error { return due[i]() })
		clk.Advance(step)
	}
}

// atOnce runs do(0) … do(n-1) in goroutines and fails on their errors.
func atOnce(b *testing.B, n int, do func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = do(i) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

// fleetResult is what a fleetLoad measured.
type fleetResult struct {
	polls, leases, empty, lost int64
	pollRequests               int64
	units                      localaws.Units
	hottest, hottestSplittable localaws.PartitionLoad
	table                      localaws.TableLoad
	families                   map[string]float64
}

// pollMarker marks a context as a poll's, so its requests are counted apart.
type pollMarker struct{}

// countPolls counts the requests sent with a poll's context into n.
func countPolls(n *atomic.Int64) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("fleetqCountPolls",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if ctx.Value(pollMarker{}) != nil {
						n.Add(1)
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// runFleetLoad sets the fleet up (its running jobs leased before the
// window, its backlog queued), then runs the window and measures it.
func runFleetLoad(b *testing.B, l fleetLoad) fleetResult {
	b.Helper()
	cfg, err := fleetconfig.Parse("fleet.yaml", []byte(l.config()))
	if err != nil {
		b.Fatal(err)
	}
	start := t0.Add(-2 * time.Minute)
	clk := clock.NewFake(start)
	model := localaws.NewCapacity()
	pollRequests := new(atomic.Int64)
	client, table := testenv.ModeledDynamoDB(b, localaws.DynamoDBOptions{Capacity: model, IndexLag: l.lag, Now: clk.Now}, countPolls(pollRequests))
	newStore := func() *store.Store {
		return store.New(client, store.Options{Table: table, Config: cfg, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	}
	ctx := context.Background()
	setup := newStore()
	seq := atomic.Int64{}
	create := func(ctx context.Context) error {
		// Job ids as the API makes them (random), not in time order.
		id := fmt.Sprintf("%08x-load", uint32(seq.Add(1))*2654435761)
		_, _, err := setup.CreateJob(ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "wf-a",
			Input: json.RawMessage(`{"frames":120,"scene":"s3://bucket/scenes/a.usd"}`)})
		return err
	}
	// The workers whose jobs end in the window: registered, their jobs
	// created, then leased before the window one by one, the lag apart,
	// so that each poll sees the lease before it (the load starts from a
	// quiet fleet's state, not from a burst of lost claims).
	finishing := int(float64(l.rate) * l.window.Seconds())
	workers := make([]store.WorkerAuth, finishing)
	atOnce(b, finishing, func(i int) error {
		workers[i] = store.WorkerAuth{WorkerID: fmt.Sprintf("w%05d", (i*7919)%100000), Fleet: "gpu", TokenHash: fmt.Sprintf("hash-%d", i)}
		_, err := setup.RegisterWorker(ctx, store.Registration{WorkerID: workers[i].WorkerID, Fleet: "gpu", Stage: "test",
			InstanceID: "i-" + workers[i].WorkerID, InstanceType: "g5.xlarge", AZ: "us-east-1a", MaxConcurrency: 1, TokenHash: workers[i].TokenHash})
		return err
	})
	running := make([]job.Job, finishing)
	if !l.idle {
		atOnce(b, finishing, func(int) error { return create(ctx) })
		clk.Advance(l.lag + time.Second)
		for i, w := range workers { // one by one, each once the index shows the one before leased
			if running[i], err = setup.LeaseNext(ctx, w, []string{"wf-a"}); err != nil {
				b.Fatalf("lease running job %d: %v", i, err)
			}
			clk.Advance(l.lag)
		}
	}
	atOnce(b, l.backlog, func(int) error { return create(ctx) })
	// The window starts at a whole second, once the index shows the backlog.
	now := clk.Now().Add(l.lag)
	clk.Advance(now.Truncate(time.Second).Add(time.Second).Sub(clk.Now()))
	model.Reset()
	pollRequests.Store(0)

	stores := make([]*store.Store, l.instances)
	for i := range stores {
		stores[i] = newStore()
	}
	var events []event
	var res fleetResult
	var polls, leases, empty atomic.Int64
	for k := range finishing {
		at := time.Duration(float64(k) / float64(l.rate) * float64(time.Second))
		w, j, st := workers[k], running[k], stores[k%len(stores)]
		events = append(events, event{at: at, do: func() error {
			if !l.idle {
				if err := st.Complete(ctx, w, j.ID, j.LeaseToken, json.RawMessage(`{"ok":true}`)); err != nil {
					return fmt.Errorf("complete %s: %w", j.ID, err)
				}
			}
			polls.Add(1)
			_, err := st.LeaseNext(context.WithValue(ctx, pollMarker{}, true), w, []string{"wf-a"})
			switch {
			case errors.Is(err, store.ErrNoJob):
				empty.Add(1) // the worker polls again after poll_seconds, past the window
				return nil
			case err != nil:
				return fmt.Errorf("poll: %w", err)
			}
			leases.Add(1)
			return nil
		}})
	}
	arrivals := finishing
	if l.noArrivals {
		arrivals = 0
	}
	for i := range arrivals {
		events = append(events, event{at: time.Duration(float64(i) / float64(l.rate) * float64(time.Second)), do: func() error { return create(ctx) }})
	}
	for i := range l.burst {
		events = append(events, event{at: time.Duration(float64(i) / float64(l.burst) * float64(time.Second)), do: func() error { return create(ctx) }})
	}
	b.StartTimer()
	runSteps(b, clk, l.step, l.window, events)
	b.StopTimer()

	res.polls, res.leases, res.empty = polls.Load(), leases.Load(), empty.Load()
	res.lost = model.Refused()
	res.pollRequests = pollRequests.Load()
	res.units = model.Total()
	res.hottest = model.Hottest()
	res.table = model.HottestTable()
	res.families = map[string]float64{}
	for _, p := range model.Loads() {
		if p.Splittable && p.Share() > res.hottestSplittable.Share() {
			res.hottestSplittable = p
		}
		for _, f := range []struct{ index, prefix, name string }{
			{store.IndexByState, "Q#", "ready"}, {store.IndexByState, "L#", "leased"},
			{store.IndexByState, "S#", "succeeded"}, {store.IndexByState, "W#", "workers"}, {"", "OUTBOX#", "outbox"},
		} {
			if p.Index == f.index && strings.HasPrefix(p.Key, f.prefix) {
				res.families[f.name] = max(res.families[f.name], p.Share())
			}
		}
	}
	return res
}

// runFleetBenchmark runs the load as the named sub-benchmark and reports it.
func runFleetBenchmark(b *testing.B, name string, l fleetLoad) {
	b.Run(name, func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			runFleetLoad(b, l).report(b)
		}
	})
}

func (r fleetResult) report(b *testing.B) {
	b.Helper()
	leases := float64(max(r.leases, 1))
	b.ReportMetric(100*r.hottest.Share(), "hottest-partition-%")
	for name, share := range r.families {
		b.ReportMetric(100*share, "hottest-"+name+"-%")
	}
	b.ReportMetric(100*r.table.Share(), "table-%")
	b.ReportMetric(float64(r.lost)/leases, "lost-claims/lease")
	b.ReportMetric(float64(r.leases)/float64(max(r.polls, 1)), "leases/poll")
	b.ReportMetric(float64(r.pollRequests)/leases, "poll-requests/lease")
	b.ReportMetric(r.units.Write/leases, "write-units/lease")
	b.ReportMetric(r.units.Read/leases, "read-units/lease")
	b.Logf("hottest partition DynamoDB cannot split: %v", r.hottest)
	if r.hottestSplittable.Share() > 0 {
		b.Logf("hottest partition it can split for heat: %v", r.hottestSplittable)
	}
	b.Logf("hottest table second: %v", r.table)
	b.Logf("%d polls, %d leases, %d empty, %d lost claims; %d poll requests; %.0f write units, %.0f read units",
		r.polls, r.leases, r.empty, r.lost, r.pollRequests, r.units.Write, r.units.Read)
}

// BenchmarkCapacityFleet is the goal: a fleet of 10,000 workers running
// 1-minute jobs, 170 leases and completions a second and as many new jobs,
// with a burst of 1,000 submissions more in the first second and 1,000
// queued, for 2 s of simulated time through 8 API processes, the index
// 500 ms and 1 s behind the table, with one ready shard and four. Goals:
// the hottest partition DynamoDB cannot split under 80% of its limit, at
// most 0.5 lost claims per lease.
func BenchmarkCapacityFleet(b *testing.B) {
	for _, lag := range indexLags {
		for _, shards := range []int{1, 4} {
			l := fleetLoad{rate: 170, burst: 1000, backlog: 1000, lag: lag, shards: shards, window: 2 * time.Second, step: pollStep, instances: 8}
			runFleetBenchmark(b, fmt.Sprintf("lag=%s/ready_shards=%d", lag, shards), l)
		}
	}
}

// BenchmarkCapacityFleetLeaseRate is the same fleet without the burst at
// higher lease rates, each with a backlog of two seconds' leases, the
// index 500 ms and 1 s behind, four ready shards, for one second: the
// highest rate one fleet sustains is the highest whose hottest partition
// stays under its limit with at most 0.5 lost claims per lease
// (BenchmarkCapacityLeaseAndComplete is the same at 1,000 a second).
func BenchmarkCapacityFleetLeaseRate(b *testing.B) {
	for _, lag := range indexLags {
		for _, rate := range []int{340, 680} {
			l := fleetLoad{rate: rate, backlog: 2 * rate, lag: lag, shards: 4, window: time.Second, step: pollStep, instances: 8}
			runFleetBenchmark(b, fmt.Sprintf("lag=%s/rate=%d", lag, rate), l)
		}
	}
}
