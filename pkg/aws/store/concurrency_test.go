package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// A retry backoff of zero lets a failed job be leased again at once, so the
// race below exercises re-leasing as much as first leases.
const raceConfig = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a]
    instance_types: [g5.xlarge]
    worker_cap: 100
    lease_seconds: 600
    retry:
      max_attempts: 3
      backoff: [0s, 0s, 0s]
    preemption_cap: 3
`

// TestConcurrentWorkersLeaseEachJobExclusively races 50 workers over 250 jobs
// with random completions, failures and requeues. The clock never moves, so no
// lease expires: any moment at which two workers hold the same job is a bug in
// the fencing, not a legitimate re-lease. Every job must end in exactly one
// terminal state, reported by exactly one worker.
//
// Under the race detector it races 12 workers over 60 jobs: the embedded
// server scans its table on every query and copies it on every transaction,
// so the cost grows with jobs times requests (at 20 workers over 100 jobs it
// was a third of the store suite's CPU under -race, 53 s alone). The ratio of
// jobs to workers, and so the contention per job, stays the same, and every
// release still wakes a dozen pollers that race for the same jobs.
func TestConcurrentWorkersLeaseEachJobExclusively(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("race of many workers over many jobs")
	}
	workers, jobs := 50, 250
	if testenv.Race {
		workers, jobs = 12, 60
	}
	cfg, err := fleetconfig.Parse("race.yaml", []byte(raceConfig))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg, func(o *store.Options) { o.LeaseSpread = 8 })
	for i := range jobs {
		e.submit(fmt.Sprintf("job-%04d", i), "wf-a", i%3)
	}
	auths := make([]store.WorkerAuth, workers)
	for i := range auths {
		auths[i] = e.register(fmt.Sprintf("w%02d", i), "gpu", 1)
	}

	var (
		mu        sync.Mutex
		holder    = map[string]string{} // job id -> worker holding its lease now
		terminals = map[string][]job.Status{}
		violation atomic.Value
		done      atomic.Int64
		leases    atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flag := func(format string, args ...any) {
		violation.CompareAndSwap(nil, fmt.Sprintf(format, args...))
		cancel()
	}
	terminal := func(id string, s job.Status) {
		mu.Lock()
		terminals[id] = append(terminals[id], s)
		mu.Unlock()
		if done.Add(1) == int64(jobs) {
			cancel()
		}
	}

	// released wakes the workers waiting after an empty poll each time a
	// lease is given up, so idle workers do not starve the busy ones.
	var released broadcast

	var wg sync.WaitGroup
	for w, a := range auths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				// Taken before the poll: a release after it wakes this
				// worker even if it lands before the worker waits.
				changed := released.next()
				j, err := e.st.LeaseNext(ctx, a, []string{"wf-a"})
				if errors.Is(err, store.ErrContention) {
					continue // a write raced another: retry at once
				}
				if errors.Is(err, store.ErrNoJob) {
					// Every job is held, or the ones seen were taken by
					// other workers: none is free until someone releases.
					select {
					case <-changed:
					case <-ctx.Done():
					}
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						flag("LeaseNext(%s): %v", a.WorkerID, err)
					}
					return
				}
				leases.Add(1)
				mu.Lock()
				if other, held := holder[j.ID]; held {
					mu.Unlock()
					flag("%s leased %s while %s held it", a.WorkerID, j.ID, other)
					return
				}
				holder[j.ID] = a.WorkerID
				mu.Unlock()

				// Give the job up in our books before the release is
				// written: once it commits, another worker may lease it.
				release := func() {
					mu.Lock()
					delete(holder, j.ID)
					mu.Unlock()
				}
				// The calls below run under a context that is never
				// canceled: a release cut short would leave a lease no
				// clock will ever expire, and the final check would fail.
				bg := context.Background()
				switch r := rng.IntN(10); {
				case r < 6:
					release()
					err := e.st.Complete(bg, a, j.ID, j.LeaseToken, json.RawMessage(`{"ok":true}`))
					released.signal()
					if err != nil {
						flag("Complete(%s): %v", j.ID, err)
						return
					}
					terminal(j.ID, job.Succeeded)
				case r < 8:
					release()
					out, err := e.st.Fail(bg, a, j.ID, j.LeaseToken, job.Error{Message: "flaky", Retryable: true})
					released.signal()
					if err != nil {
						flag("Fail(%s): %v", j.ID, err)
						return
					}
					if out.Status.Terminal() {
						terminal(j.ID, out.Status)
					}
				default:
					release()
					out, err := e.st.Requeue(bg, a, j.ID, j.LeaseToken, job.SpotInterruption)
					released.signal()
					if err != nil {
						flag("Requeue(%s): %v", j.ID, err)
						return
					}
					if out.Status.Terminal() {
						terminal(j.ID, out.Status)
					}
				}
			}
		}()
	}
	wg.Wait()
	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}
	if got := done.Load(); got != int64(jobs) {
		t.Fatalf("%d of %d jobs reached a terminal state", got, jobs)
	}
	for i := range jobs {
		id := fmt.Sprintf("job-%04d", i)
		reported := terminals[id]
		if len(reported) != 1 {
			t.Fatalf("%s: terminal outcomes reported %v, want exactly one", id, reported)
		}
		j, err := e.st.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != reported[0] {
			t.Fatalf("%s: stored status %s, reported %s", id, j.Status, reported[0])
		}
	}
	for _, a := range auths {
		w, err := e.st.GetWorker(context.Background(), a.WorkerID)
		if err != nil {
			t.Fatal(err)
		}
		if w.Leases != 0 {
			t.Fatalf("worker %s still counts %d leases after every job ended", a.WorkerID, w.Leases)
		}
	}
	t.Logf("%d leases for %d jobs by %d workers", leases.Load(), jobs, workers)

	// Every outcome is announced exactly once, whatever the event bus does:
	// relay through a bus that refuses a third of the calls until the
	// outbox is empty, with two relays racing.
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	rec := &recorder{fail: func() bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(3) == 0 }}
	for pass := 0; pass < 100; pass++ {
		var rw sync.WaitGroup
		var sent atomic.Int64
		for range 2 {
			rw.Add(1)
			go func() {
				defer rw.Done()
				n, _ := e.st.RelayOutbox(context.Background(), rec, 100)
				sent.Add(int64(n))
			}()
		}
		rw.Wait()
		if sent.Load() == 0 {
			break
		}
	}
	rec.fail = nil // the bus recovers: whatever is left must now go out
	for {
		n, err := e.st.RelayOutbox(context.Background(), rec, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	outcomes := map[string][]string{}
	for _, ev := range rec.byID(t) {
		if ev.DetailType != store.EventFailed {
			outcomes[ev.Detail.JobID] = append(outcomes[ev.Detail.JobID], ev.Detail.Status)
		}
	}
	for id, reported := range terminals {
		if got := outcomes[id]; len(got) != 1 || got[0] != string(reported[0]) {
			t.Fatalf("%s ended %s but its outcome events are %v", id, reported[0], got)
		}
	}
}

// broadcast wakes every waiter at once: next answers a channel that the
// following signal closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
	}
	b.ch = make(chan struct{})
}
