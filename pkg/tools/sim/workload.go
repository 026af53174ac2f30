package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// JobSpec is one job of a workload.
type JobSpec struct {
	Arrival  time.Duration // since the start of the simulation
	Duration time.Duration // how long it runs once started
	Workflow string
	// Tenant owns the job (empty: one tenant for all).
	Tenant string
}

// Workload is a named list of jobs, ordered by arrival.
type Workload struct {
	Name string
	Jobs []JobSpec
	// Slots is the slots per instance the workload's fleet usually has
	// (a fleet config given to the simulation overrides it).
	Slots int
	// MaxInstances is the usual fleet size limit for it.
	MaxInstances int
}

// BuiltIns are the workloads modelled on the design documents.
var BuiltIns = []string{"regen3d", "video", "backtest"}

// Scenarios are built-in workloads made to show one capability: "tenants"
// (three steady tenants and one that bursts at ten times their rate) and
// "tenants-steady" (the same without the burst).
var Scenarios = []string{"tenants", "tenants-steady"}

// BuiltIn generates a built-in workload for days days.
func BuiltIn(name string, seed uint64, days int) (Workload, error) {
	if days < 1 {
		days = 1
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	switch name {
	case "regen3d":
		return regen3d(rng, days), nil
	case "video":
		return video(rng, days), nil
	case "backtest":
		return backtest(rng, days), nil
	case "tenants":
		return tenants(rng, days, true), nil
	case "tenants-steady":
		return tenants(rng, days, false), nil
	}
	return Workload{}, fmt.Errorf("unknown workload %q: use %s or a CSV file", name, strings.Join(append(slices.Clone(BuiltIns), Scenarios...), ", "))
}

const day = 24 * time.Hour

// regen3d: 1,000 scenes a day, ~35 minutes each (log-normal), arriving
// with a diurnal rhythm (busiest mid-afternoon, quietest before dawn), one
// scene per GPU.
func regen3d(rng *rand.Rand, days int) Workload {
	const perDay = 1000.0
	const amp = 0.6 // peak-to-mean swing of the arrival rate
	mean := perDay / day.Seconds()
	rate := func(t float64) float64 {
		phase := 2 * math.Pi * (t/day.Seconds() - 9.0/24) // low at 03:00, high at 15:00
		return mean * (1 - amp*math.Cos(phase))
	}
	w := Workload{Name: "regen3d", Slots: 1, MaxInstances: 60}
	end := float64(days) * day.Seconds()
	peak := mean * (1 + amp)
	// Thinning of a Poisson process at the peak rate.
	for t := rng.ExpFloat64() / peak; t < end; t += rng.ExpFloat64() / peak {
		if rng.Float64()*peak > rate(t) {
			continue
		}
		w.Jobs = append(w.Jobs, JobSpec{Arrival: secs(t), Duration: lognormal(rng, 35*time.Minute, 0.35, 5*time.Minute, 120*time.Minute), Workflow: "regen3d"})
	}
	return w
}

// video: image and video jobs of 1 to 30 minutes in bursts (a user uploads
// a batch), bursts during the working day.
func video(rng *rand.Rand, days int) Workload {
	w := Workload{Name: "video", Slots: 2, MaxInstances: 20}
	for d := range days {
		base := time.Duration(d) * day
		for t := 8 * time.Hour; t < 22*time.Hour; {
			t += secs(rng.ExpFloat64() * (50 * time.Minute).Seconds())
			if t >= 22*time.Hour {
				break
			}
			n := 5 + rng.IntN(36)
			for range n {
				at := base + t + secs(rng.Float64()*120)
				dur := secs(math.Exp(math.Log(60) + rng.Float64()*(math.Log(1800)-math.Log(60)))) // log-uniform 1-30 min
				w.Jobs = append(w.Jobs, JobSpec{Arrival: at, Duration: dur, Workflow: "video"})
			}
		}
	}
	sortJobs(w.Jobs)
	return w
}

// backtest: bursts of several ~80-minute simulation runs, hours apart.
func backtest(rng *rand.Rand, days int) Workload {
	w := Workload{Name: "backtest", Slots: 1, MaxInstances: 10}
	end := time.Duration(days) * day
	for t := secs(rng.Float64() * 3600); t < end; t += 3*time.Hour + secs(rng.Float64()*3*3600) {
		n := 3 + rng.IntN(6)
		for range n {
			at := t + secs(rng.Float64()*300)
			dur := 80*time.Minute + secs((rng.Float64()-0.5)*16*60)
			w.Jobs = append(w.Jobs, JobSpec{Arrival: at, Duration: dur, Workflow: "backtest"})
		}
	}
	sortJobs(w.Jobs)
	return w
}

// tenants: three tenants each submit about 6 jobs an hour of about 15
// minutes from 08:00 to 20:00; with burst, a fourth submits at ten times
// that rate from 10:00 to 12:00. The fleet has 1 slot and at most 12
// instances, so the burst fills it.
func tenants(rng *rand.Rand, days int, burst bool) Workload {
	name := "tenants"
	if !burst {
		name = "tenants-steady"
	}
	w := Workload{Name: name, Slots: 1, MaxInstances: 12}
	// Every stream draws from its own generator, so the steady tenants'
	// jobs are the same with and without the burst.
	add := func(tenant string, seed uint64, from, to time.Duration, perHour float64) {
		r := rand.New(rand.NewPCG(rng.Uint64()^seed, seed))
		for t := from + secs(r.ExpFloat64()*3600/perHour); t < to; t += secs(r.ExpFloat64() * 3600 / perHour) {
			w.Jobs = append(w.Jobs, JobSpec{Arrival: t, Duration: lognormal(r, 15*time.Minute, 0.4, 2*time.Minute, 60*time.Minute), Workflow: "render", Tenant: tenant})
		}
	}
	for d := range days {
		base := time.Duration(d) * day
		draws := [4]uint64{rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()}
		for i, t := range []string{"t1", "t2", "t3"} {
			add(t, draws[i], base+8*time.Hour, base+20*time.Hour, 6)
		}
		if burst {
			add("burst", draws[3], base+10*time.Hour, base+12*time.Hour, 60)
		}
	}
	sortJobs(w.Jobs)
	return w
}

func lognormal(rng *rand.Rand, mean time.Duration, sigma float64, lo, hi time.Duration) time.Duration {
	mu := math.Log(mean.Seconds()) - sigma*sigma/2
	d := secs(math.Exp(mu + sigma*rng.NormFloat64()))
	return min(max(d, lo), hi)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }

func sortJobs(js []JobSpec) {
	slices.SortStableFunc(js, func(a, b JobSpec) int { return int(a.Arrival - b.Arrival) })
}

// LoadCSV reads a workload from CSV rows of arrival_seconds,
// duration_seconds, workflow, tenant (the last two optional; a header row
// is allowed).
func LoadCSV(name string, r io.Reader) (Workload, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // the workflow column is optional
	rows, err := cr.ReadAll()
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", name, err)
	}
	w := Workload{Name: name, Slots: 1, MaxInstances: 10}
	for i, row := range rows {
		if len(row) < 2 {
			return Workload{}, fmt.Errorf("%s:%d: want arrival_seconds,duration_seconds[,workflow]", name, i+1)
		}
		at, err1 := strconv.ParseFloat(strings.TrimSpace(row[0]), 64)
		dur, err2 := strconv.ParseFloat(strings.TrimSpace(row[1]), 64)
		if err1 != nil || err2 != nil {
			if i == 0 {
				continue // header
			}
			return Workload{}, fmt.Errorf("%s:%d: arrival and duration must be seconds", name, i+1)
		}
		if at < 0 || dur <= 0 {
			return Workload{}, fmt.Errorf("%s:%d: arrival must be >= 0 and duration > 0", name, i+1)
		}
		wf := "csv"
		if len(row) > 2 && strings.TrimSpace(row[2]) != "" {
			wf = strings.TrimSpace(row[2])
		}
		tenant := ""
		if len(row) > 3 {
			tenant = strings.TrimSpace(row[3])
		}
		w.Jobs = append(w.Jobs, JobSpec{Arrival: secs(at), Duration: secs(dur), Workflow: wf, Tenant: tenant})
	}
	if len(w.Jobs) == 0 {
		return Workload{}, fmt.Errorf("%s: no jobs", name)
	}
	sortJobs(w.Jobs)
	return w, nil
}
