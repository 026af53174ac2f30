package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

const benchConfig = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a]
    instance_types: [g5.xlarge]
    worker_cap: 100
    lease_seconds: 600
`

// benchEnv is a fresh table holding `jobs` queued jobs and `workers`
// registered workers of one fleet, on the store's default lease settings.
func benchEnv(b *testing.B, jobs, workers int) (*env, []store.WorkerAuth) {
	e, auths, _ := countedBenchEnv(b, benchConfig, jobs, workers, func(int) string { return "t" })
	return e, auths
}

// countedBenchEnv is benchEnv on a given config, with job i of tenant
// tenant(i), and a count of the DynamoDB requests the store sends.
func countedBenchEnv(b *testing.B, config string, jobs, workers int, tenant func(int) string) (*env, []store.WorkerAuth, *atomic.Int64) {
	b.Helper()
	cfg, err := fleetconfig.Parse("bench.yaml", []byte(config))
	if err != nil {
		b.Fatal(err)
	}
	n := new(atomic.Int64)
	client, table := testenv.DynamoDB(b, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, awsenv.CountRequests(n)) })
	e := &env{ctx: context.Background(), clock: clock.NewFake(t0), cfg: cfg}
	e.st = store.New(client, store.Options{Table: table, Config: cfg, Clock: e.clock, Logger: slog.New(slog.DiscardHandler)})
	for i := range jobs {
		if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: fmt.Sprintf("job-%05d", i), TenantID: tenant(i), WorkflowID: "wf-a"}); err != nil {
			b.Fatal(err)
		}
	}
	auths := make([]store.WorkerAuth, workers)
	for i := range auths {
		a := store.WorkerAuth{WorkerID: fmt.Sprintf("w%03d", i), Fleet: "gpu", TokenHash: fmt.Sprintf("hash-%d", i)}
		if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: a.WorkerID, Fleet: "gpu", Stage: "test", MaxConcurrency: fleetconfig.MaxSlots, TokenHash: a.TokenHash}); err != nil {
			b.Fatal(err)
		}
		auths[i] = a
	}
	n.Store(0)
	return e, auths, n
}

// BenchmarkLeaseNext is the lease path of one poller with work waiting: an
// index query, the claim transaction and the read of the leased job. Tables
// are refilled every MaxSlots leases, outside the timer, so the embedded server's
// per-transaction cost (it copies the table) does not grow with b.N.
func BenchmarkLeaseNext(b *testing.B) {
	const batch = fleetconfig.MaxSlots // one worker holds at most this many leases
	var (
		e    *env
		a    store.WorkerAuth
		left int
	)
	wf := []string{"wf-a"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			var auths []store.WorkerAuth
			e, auths = benchEnv(b, batch, 1)
			a, left = auths[0], batch
			b.StartTimer()
		}
		if _, err := e.st.LeaseNext(e.ctx, a, wf); err != nil {
			b.Fatal(err)
		}
		left--
	}
}

// BenchmarkLeaseContention50Pollers has 50 workers poll one fleet at once
// until 500 queued jobs are leased, and reports claims lost to another
// poller per successful lease (goal: at most 0.5), DynamoDB requests per
// lease (every poll counted, the empty ones at the end too) and the
// latency of a successful poll.
func BenchmarkLeaseContention50Pollers(b *testing.B) {
	benchContention(b, benchConfig, func(int) string { return "t" })
}

// BenchmarkLeaseContention50PollersFairShare is the same with fair share
// on: two tenants of equal weight, one with ten times the other's backlog.
func BenchmarkLeaseContention50PollersFairShare(b *testing.B) {
	benchContention(b, benchConfig+"tenants:\n  - id: big\n  - id: small\n", func(i int) string {
		if i%11 == 10 {
			return "small"
		}
		return "big"
	})
}

// BenchmarkLeaseContention50PollersCapped is the fair-share race with both
// tenants under a max_leased cap above their backlogs: every claim also
// takes a slot in its tenant's leased counter, and all of a tenant's claims
// meet on that one item.
func BenchmarkLeaseContention50PollersCapped(b *testing.B) {
	benchContention(b, benchConfig+"tenants:\n  - id: big\n    max_leased: 1000\n  - id: small\n    max_leased: 1000\n", func(i int) string {
		if i%11 == 10 {
			return "small"
		}
		return "big"
	})
}

func benchContention(b *testing.B, config string, tenant func(int) string) {
	const pollers, jobs = 50, 500
	var conflicts, claims, requests int64
	var lat []time.Duration
	for range b.N {
		b.StopTimer()
		e, auths, n := countedBenchEnv(b, config, jobs, pollers, tenant)
		b.StartTimer()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range auths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					start := time.Now()
					_, err := e.st.LeaseNext(e.ctx, a, []string{"wf-a"})
					d := time.Since(start)
					if errors.Is(err, store.ErrNoJob) {
						return
					}
					if err != nil && !errors.Is(err, store.ErrContention) {
						b.Error(err)
						return
					}
					if err == nil {
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		st := e.st.LeaseStats()
		if st.Claims != jobs {
			b.Fatalf("%d claims for %d jobs", st.Claims, jobs)
		}
		conflicts += st.Conflicts
		claims += st.Claims
		requests += n.Load()
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(conflicts)/float64(claims), "conflicts/lease")
	b.ReportMetric(float64(requests)/float64(claims), "requests/lease")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
