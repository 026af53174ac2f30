package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// The key design's goals under DynamoDB's capacity model (docs/benchmarks.md,
// "The key design under DynamoDB's limits"). Each benchmark runs a scaled-down
// load inside one second of the fake clock and scales the hottest partition's
// units up to the rate of the goal: every operation's units on the shared
// partitions (a fleet's index partitions) are the same whatever the rate, so
// the load there grows linearly with it.

// List prices, us-east-1, on-demand, as published on 2026-11-25:
// DynamoDB https://aws.amazon.com/dynamodb/pricing/on-demand/ ($0.625 per
// million write request units, $0.125 per million read request units);
// API Gateway HTTP APIs https://aws.amazon.com/api-gateway/pricing/ ($1.00
// per million requests, first 300 million a month); Lambda
// https://aws.amazon.com/lambda/pricing/ ($0.20 per million requests,
// $0.0000133334 per GB-second on Arm); SQS https://aws.amazon.com/sqs/pricing/
// ($0.40 per million standard-queue requests); EventBridge
// https://aws.amazon.com/eventbridge/pricing/ ($1.00 per million custom
// events).
const (
	usdPerMillionWriteUnits = 0.625
	usdPerMillionReadUnits  = 0.125
	usdPerMillionAPICalls   = 1.00
	usdPerMillionLambdaRuns = 0.20
	usdPerLambdaGBSecond    = 0.0000133334
	usdPerMillionSQSCalls   = 0.40
	usdPerMillionEvents     = 1.00
)

// What a one-heartbeat job costs outside DynamoDB, per job: API Gateway
// calls (submit, the poll that leases, heartbeat, complete), Lambda
// invocations (those four on the api function, one dispatch batch per job
// at worst) at 256 MB and an assumed 25 ms each, SQS calls (send, and the
// event source mapping's receive and delete, one each at worst), and the
// Job Succeeded event.
const (
	apiCallsPerJob      = 4
	lambdaRunsPerJob    = 5
	lambdaGBSecondsPerJ = lambdaRunsPerJob * 0.25 * 0.025
	sqsCallsPerJob      = 3
	eventsPerJob        = 1
)

func otherUSDPerMillionJobs() float64 {
	return apiCallsPerJob*usdPerMillionAPICalls + lambdaRunsPerJob*usdPerMillionLambdaRuns +
		lambdaGBSecondsPerJ*usdPerLambdaGBSecond*1e6 + sqsCallsPerJob*usdPerMillionSQSCalls + eventsPerJob*usdPerMillionEvents
}

// reportHottest reports the hottest partition's load scaled by scale, as a
// percentage of its limit, and logs which partition it is.
func reportHottest(b *testing.B, m *modeledEnv, scale float64) {
	hot := m.model.Hottest()
	b.ReportMetric(100*hot.Share()*scale, "hottest-partition-%")
	where := hot.Index
	if where == "" {
		where = "table"
	}
	b.Logf("hottest partition at the goal's rate: %s %q, %.0f write units/s, %.0f read units/s",
		where, hot.Key, hot.Units.Write*scale, hot.Units.Read*scale)
}

// indexLags are the index lags every load benchmark runs with: a global
// secondary index's entries follow the table's writes "in a fraction of a
// second" normally, longer under load, and a claim the index does not show
// yet is one more poller's lost claim.
var indexLags = []time.Duration{500 * time.Millisecond, time.Second}

// pollStep is how long a poll's read and claim take in the simulated load
// benchmarks (a few DynamoDB round trips): polls within it read the same
// index state.
const pollStep = 25 * time.Millisecond

// BenchmarkCapacityLeaseAndComplete is one fleet at 1,000 leases and 1,000
// completions a second (and the 1,000 creations a second that feed them),
// with 150 queued, for one second at the full rate, the polls of each
// 25 ms at once through 8 API processes, with the index 500 ms and 1 s
// behind the table, the fleet's partitions in one shard and in four
// (ready_shards: 4): goal, the hottest partition DynamoDB cannot split under
// 80% of its limit (runFleetLoad, fleet_bench_test.go).
func BenchmarkCapacityLeaseAndComplete(b *testing.B) {
	for _, lag := range indexLags {
		for _, shards := range []int{1, 4} {
			l := fleetLoad{rate: 1000, backlog: 150, lag: lag, shards: shards, window: time.Second, step: pollStep, instances: 8}
			runFleetBenchmark(b, fmt.Sprintf("lag=%s/ready_shards=%d", lag, shards), l)
		}
	}
}

// BenchmarkCapacityIdleWorkers is 10,000 connected idle workers of one
// fleet polling at the default interval (poll_seconds 5: 2,000 empty polls
// a second), sampled with 100 workers seen last at times spread over a
// heartbeat interval, each polling every 5 s for 30 s (20 polls a second,
// scaled by 100): goal, the hottest partition-second under 80% of its
// limit. A sample this small makes the busiest second noisy (a few writes
// more or less are tens of percent); index-write-units/empty-poll is exact.
// It runs with the fleet's partitions in one shard and in four, the index
// 500 ms and 1 s behind, the polls of each 25 ms at once through 8 API
// processes (an empty poll claims nothing, so neither changes what it
// costs; the sample's 20 polls a second rarely meet within a step).
func BenchmarkCapacityIdleWorkers(b *testing.B) {
	for _, lag := range indexLags {
		for _, c := range []struct{ name, config string }{{"ready_shards=1", capacityConfig}, {"ready_shards=4", shardedCapacityConfig}} {
			b.Run(fmt.Sprintf("lag=%s/%s", lag, c.name), func(b *testing.B) { benchmarkIdleWorkers(b, c.config, lag) })
		}
	}
}

func benchmarkIdleWorkers(b *testing.B, config string, lag time.Duration) {
	const workers, interval, sample, window = 10000, fleetconfig.DefaultPollSeconds * time.Second, 100, 30 * time.Second
	scale := float64(workers) / float64(sample)
	polls := 0
	for range b.N {
		b.StopTimer()
		m := newModeledEnv(b, config, lag)
		var auths []store.WorkerAuth
		for i := range sample { // registered, so last seen, over one heartbeat interval
			auths = append(auths, m.registerWorker(b, i, 1))
			m.clock.Advance(time.Duration(fleetconfig.DefaultHeartbeatSeconds) * time.Second / sample)
		}
		m.nextSecond()
		b.StartTimer()
		// Polls come in an order unrelated to when each worker was last
		// seen, as the phases of independent workers are.
		// The polls of each step run at once, through 8 API processes.
		order := make([]store.WorkerAuth, sample)
		for i, a := range auths {
			order[i*37%sample] = a
		}
		stores := make([]*store.Store, 8)
		for i := range stores {
			stores[i] = m.newStore()
		}
		var events []event
		for k := range int(window / interval * sample) {
			a, st := order[k%sample], stores[k%len(stores)]
			events = append(events, event{at: time.Duration(k) * interval / sample, do: func() error {
				if _, err := st.LeaseNext(m.ctx, a, []string{"wf-a"}); !errors.Is(err, store.ErrNoJob) {
					return fmt.Errorf("an idle poll = %v, want ErrNoJob", err)
				}
				return nil
			}})
		}
		polls += len(events)
		runSteps(b, m.clock, pollStep, window, events)
		b.StopTimer()
		reportHottest(b, m, scale)
		t := m.model.Total()
		b.ReportMetric(m.model.ByIndex()[store.IndexByState].Write/float64(polls), "index-write-units/empty-poll")
		b.ReportMetric(t.Write/float64(polls), "write-units/empty-poll")
		b.ReportMetric(t.Read/float64(polls), "read-units/empty-poll")
		b.ReportMetric(float64(m.requests.Load())/float64(polls), "requests/empty-poll")
	}
}

// BenchmarkCapacityLostClaims is a burst of 200 polls a second, from 200
// idle workers, the polls of each 25 ms at once through 8 warm API
// instances (each its own Store), on a backlog of 500 jobs, with index
// queries 500 ms and 1 s behind the table, as a DynamoDB index can be: a
// claimed job stays among the candidates until the index catches up. Goal:
// at most 0.5 lost claims per lease.
func BenchmarkCapacityLostClaims(b *testing.B) {
	for _, lag := range indexLags {
		l := fleetLoad{rate: 200, idle: true, noArrivals: true, backlog: 500, lag: lag, shards: 1, window: time.Second, step: pollStep, instances: 8}
		runFleetBenchmark(b, fmt.Sprintf("lag=%s", lag), l)
	}
}

// BenchmarkCapacityHeartbeat is a leased job's heartbeats, 30 s apart: goal,
// at most 2 write units per heartbeat.
func BenchmarkCapacityHeartbeat(b *testing.B) {
	const beats = 20
	for range b.N {
		b.StopTimer()
		m := newModeledEnv(b, capacityConfig, 0)
		m.createJobs(b, "job", 1)
		w := m.registerWorkers(b, 1, 1)[0]
		j, err := m.st.LeaseNext(m.ctx, w, []string{"wf-a"})
		if err != nil {
			b.Fatal(err)
		}
		m.nextSecond()
		b.StartTimer()
		for range beats {
			m.clock.Advance(30 * time.Second)
			if _, err := m.st.Heartbeat(m.ctx, w, j.ID, j.LeaseToken, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		t := m.model.Total()
		b.ReportMetric(t.Write/beats, "write-units/heartbeat")
		b.ReportMetric(m.model.ByIndex()[store.IndexByState].Write/beats, "index-write-units/heartbeat")
		b.ReportMetric(float64(m.requests.Load())/beats, "requests/heartbeat")
	}
}

// BenchmarkCapacityJobLifecycle is one job's way through the store with one
// heartbeat, as the functions drive it: dispatch creates it and reads the
// fleet state (wake-on-enqueue), a poll leases it, the worker heartbeats
// and completes it, and the relay announces the outcome. It reports the
// DynamoDB requests and units per job and the control plane's price per
// million such jobs at list prices. Goals: at most 8 requests per
// lifecycle (announcement apart), at most $15 per million jobs.
func BenchmarkCapacityJobLifecycle(b *testing.B) {
	const jobs = 10
	for range b.N {
		b.StopTimer()
		m := newModeledEnv(b, capacityConfig, 0)
		w := m.registerWorkers(b, 1, 1)[0]
		m.nextSecond()
		b.StartTimer()
		var lifecycle int64
		phases := []string{"accept", "create", "lease", "heartbeat", "complete", "announce"}
		phase := map[string]float64{}
		mark := m.model.Total()
		done := func(name string) {
			now := m.model.Total()
			phase[name] += now.Write - mark.Write
			mark = now
		}
		for i := range jobs {
			// As the API submits a job with the producer's own job_id:
			// accepted (looking for the key stored alone by a release
			// before tenant-scoped ids), then filed by dispatch.
			id := fmt.Sprintf("t:job-%05d", i)
			spec := job.Spec{ID: id, TenantID: "t", WorkflowID: "wf-a", Input: json.RawMessage(`{"frames":120,"scene":"s3://bucket/scenes/a.usd"}`), Accepted: true}
			start := m.requests.Load()
			if _, ok, err := m.st.AcceptJob(m.ctx, spec, false); err != nil || !ok {
				b.Fatal(ok, err)
			}
			done("accept")
			if _, created, err := m.st.CreateJob(m.ctx, spec); err != nil || !created {
				b.Fatal(created, err)
			}
			if _, err := m.st.GetFleetState(m.ctx, "gpu"); err != nil {
				b.Fatal(err)
			}
			done("create")
			j, err := m.st.LeaseNext(m.ctx, w, []string{"wf-a"})
			if err != nil {
				b.Fatal(err)
			}
			done("lease")
			m.clock.Advance(30 * time.Second)
			if _, err := m.st.Heartbeat(m.ctx, w, j.ID, j.LeaseToken, nil); err != nil {
				b.Fatal(err)
			}
			done("heartbeat")
			m.clock.Advance(10 * time.Second)
			if err := m.st.Complete(m.ctx, w, j.ID, j.LeaseToken, json.RawMessage(`{"ok":true}`)); err != nil {
				b.Fatal(err)
			}
			done("complete")
			lifecycle += m.requests.Load() - start
			if _, err := m.st.RelayJob(m.ctx, discard{}, j.ID); err != nil {
				b.Fatal(err)
			}
			done("announce")
		}
		for _, p := range phases {
			b.ReportMetric(phase[p]/jobs, p+"-write-units/job")
		}
		b.StopTimer()
		t := m.model.Total()
		wu, ru := t.Write/jobs, t.Read/jobs
		ddb := wu*usdPerMillionWriteUnits + ru*usdPerMillionReadUnits
		b.ReportMetric(float64(lifecycle)/jobs, "ddb-requests/job")
		b.ReportMetric(float64(m.requests.Load())/jobs, "ddb-requests/job-announced")
		b.ReportMetric(wu, "write-units/job")
		b.ReportMetric(ru, "read-units/job")
		b.ReportMetric(ddb, "ddb-usd/million-jobs")
		b.ReportMetric(ddb+otherUSDPerMillionJobs(), "usd/million-jobs")
	}
}

// BenchmarkCapacityOutbox is a stage announcing 1,000 outcomes a second:
// each outcome's transition writes its outbox event and the relay
// publishes and removes it, adding the job to its hour's cost total, run
// at a tenth of the rate. Goal: the hottest outbox partition, and the
// hottest cost total's, under 80% of its limit.
func BenchmarkCapacityOutbox(b *testing.B) {
	const rate, scale = 1000, 10
	for range b.N {
		b.StopTimer()
		n := rate / scale
		m := newModeledEnv(b, capacityConfig, 0)
		m.createJobs(b, "job", n)
		m.nextSecond()
		b.StartTimer()
		for i := range n {
			id := fmt.Sprintf("job-%05d", i)
			if _, err := m.st.Cancel(m.ctx, id); err != nil {
				b.Fatal(err)
			}
			if _, err := m.st.RelayJob(m.ctx, discard{}, id); err != nil {
				b.Fatal(err)
			}
			m.clock.Advance(time.Second / time.Duration(n+1))
		}
		b.StopTimer()
		// The outbox's shards (E#, its one index key, before they were
		// shards), and the hourly cost totals the relay adds to.
		outbox, costs := 0.0, 0.0
		for _, l := range m.model.Loads() {
			switch {
			case (l.Index == "" && strings.HasPrefix(l.Key, "OUTBOX#")) || (l.Index == store.IndexByState && strings.HasPrefix(l.Key, "E#")):
				outbox = max(outbox, l.Share())
			case l.Index == "" && strings.HasPrefix(l.Key, "COST#"):
				costs = max(costs, l.Share())
			}
		}
		b.ReportMetric(100*outbox*scale, "hottest-outbox-%")
		b.ReportMetric(100*costs*scale, "hottest-cost-total-%")
		reportHottest(b, m, scale)
	}
}

// discard is a Publisher that publishes nowhere.
type discard struct{}

func (discard) Publish(context.Context, []store.JobEvent) error { return nil }
