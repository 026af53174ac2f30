package lease

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is what one process's planner learns from its polls and keeps
// between them: the lease window, the queue entries other pollers took,
// each fleet's tenant census and the other tenants' jobs at the top, and
// workers' purchase options. It is per process (per warm Lambda instance);
// each learns the contention it sees. Nothing in it decides a claim: the
// claim's own conditions do.
type Memory struct {
	window atomic.Int64
	taken  takenEntries
	fleets sync.Map // fleet → *fleetMemory
	buyers purchases
}

// The lease window is how many of the oldest top-priority candidates a poll
// picks its claim from at random. It adapts to contention as TCP's window
// does, in reverse: it doubles (up to max) when a claim is lost to another
// poller and shrinks by one on each claim won at the first try, so a quiet
// fleet leases in nearly strict order and a crowded one spreads its pollers
// over more jobs. A window wider than the candidate limit reads that many:
// on DynamoDB a claimed job stays in the index until it catches up (about a
// second), so at a high lease rate the queue's head a poll reads is mostly
// taken, and only a pick from deeper in the queue finds a free job
// (docs/data-model.md, "Lost claims under index lag").
func (m *Memory) windowOf(spread int) int { return max(int(m.window.Load()), spread) }

func (m *Memory) widen(spread, most int) {
	w := m.window.Load()
	m.window.CompareAndSwap(w, int64(min(2*max(int(w), spread), most)))
}

func (m *Memory) narrow(spread int) {
	if w := m.window.Load(); int(w) > spread {
		m.window.CompareAndSwap(w, w-1)
	}
}

// takenEntries remembers, for takenFor, the queue entries this process
// lost a claim on: another poller has them, though a lagging index still
// shows the entry, so this process's polls do not try them again
// meanwhile. A job given back to the queue is a new entry (Candidate.Entry),
// leasable again at once.
type takenEntries struct {
	mu sync.Mutex
	at map[string]time.Time
}

// takenFor outlasts a DynamoDB index's usual lag (about a second).
const takenFor = 2 * time.Second

func takenKey(c Candidate) string { return c.JobID + "|" + c.Entry }

func (t *takenEntries) add(c Candidate, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[string]time.Time{}
	}
	if len(t.at) >= 1024 {
		for k, at := range t.at {
			if now.Sub(at) >= takenFor {
				delete(t.at, k)
			}
		}
	}
	t.at[takenKey(c)] = now
}

func (t *takenEntries) has(c Candidate, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.at[takenKey(c)]
	return ok && now.Sub(at) < takenFor && !now.Before(at)
}

// fleetMemory is one fleet's census of leased jobs per tenant and the
// other tenants' jobs at the top priority, each read at most once per
// censusTTL by the process's polls together.
type fleetMemory struct {
	mu       sync.Mutex
	leased   map[string]int
	leasedAt time.Time
	counting bool

	others         []Candidate
	othersAt       time.Time
	othersPriority int
	othersSkip     string
}

func (m *Memory) fleet(slug string) *fleetMemory {
	f, _ := m.fleets.LoadOrStore(slug, &fleetMemory{})
	return f.(*fleetMemory)
}

// fresh reports whether something read at `at` is still fresh at now.
func fresh(at, now time.Time, ttl time.Duration) bool {
	return !at.IsZero() && now.Sub(at) < ttl && !now.Before(at)
}

// census answers the fleet's leased jobs per tenant: the remembered one
// while fresh (or while another poll is reading it), else read.
func (f *fleetMemory) census(now time.Time, ttl time.Duration, read func() (map[string]int, error)) (map[string]int, error) {
	f.mu.Lock()
	if f.leased != nil && (fresh(f.leasedAt, now, ttl) || f.counting) {
		out := maps.Clone(f.leased)
		f.mu.Unlock()
		return out, nil
	}
	f.counting = true
	f.mu.Unlock()
	census, err := read()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counting = false
	if err != nil {
		return nil, err
	}
	f.leased, f.leasedAt = census, now
	return maps.Clone(census), nil
}

// othersAtTop answers the other tenants' jobs of a priority: remembered
// while fresh, else read.
func (f *fleetMemory) othersAtTop(now time.Time, ttl time.Duration, priority int, skip string, read func() ([]Candidate, error)) ([]Candidate, error) {
	f.mu.Lock()
	if f.othersSkip == skip && f.othersPriority == priority && fresh(f.othersAt, now, ttl) {
		out := slices.Clone(f.others)
		f.mu.Unlock()
		return out, nil
	}
	f.mu.Unlock()
	items, err := read()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.others, f.othersAt, f.othersPriority, f.othersSkip = items, now, priority, skip
	f.mu.Unlock()
	return slices.Clone(items), nil
}

// claimed notes a claim won or lost: a won claim counts in the census, and
// the job leaves the remembered jobs at the top either way.
func (f *fleetMemory) claimed(c Candidate, won bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if won && f.leased != nil {
		f.leased[c.TenantID]++
	}
	f.others = slices.DeleteFunc(f.others, func(o Candidate) bool { return o.JobID == c.JobID })
}

// full notes that a tenant was found at its cap, so the next polls order
// its jobs last without waiting for a new census.
func (f *fleetMemory) full(tenant string, limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leased != nil && f.leased[tenant] < limit {
		f.leased[tenant] = limit
	}
}

// purchases remembers workers' purchase options (they never change while a
// worker is registered), up to purchasesSize of them.
type purchases struct {
	mu sync.Mutex
	m  map[string]bool
}

const purchasesSize = 10000

func (p *purchases) get(id string) (onDemand, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	onDemand, ok = p.m[id]
	return onDemand, ok
}

func (p *purchases) put(id string, onDemand bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= purchasesSize {
		p.m = make(map[string]bool)
	}
	p.m[id] = onDemand
}
