package sim

import (
	"fmt"
	"sort"
	"strings"
)

// policyMakers builds fresh policy instances by name (a policy keeps state
// across one run, so every run gets its own).
var policyMakers = map[string]func(Options) Policy{
	"fleetq": func(o Options) Policy {
		return NewFleetq(o.Fleet).WithWarm(o.Warm...).WithForecast(o.Forecast).WithFallback(o.FallbackAfter).WithWaitSLO(o.WaitSLO).
			WithBridge(o.Bridge, o.BridgeMaxLife).WithSpotPool(o)
	},
	"visible-only":    func(Options) Policy { return NewVisibleOnly() },
	"target-tracking": func(Options) Policy { return NewTargetTracking() },
	"keda":            func(Options) Policy { return NewKEDA() },
	"oracle":          func(Options) Policy { return Oracle{} },
}

// order is the table's row order: the production policy first, then the
// baselines, the lower bound last.
var order = []string{"fleetq", "visible-only", "target-tracking", "keda", "oracle"}

// PolicyNames lists the policies in report order.
func PolicyNames() []string {
	var out []string
	for _, n := range order {
		if _, ok := policyMakers[n]; ok {
			out = append(out, n)
		}
	}
	var rest []string
	for n := range policyMakers {
		if !contains(order, n) {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// NewPolicy builds a policy by name.
func NewPolicy(name string, o Options) (Policy, error) {
	mk, ok := policyMakers[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q: use all or one of %s", name, strings.Join(PolicyNames(), ", "))
	}
	return mk(o), nil
}

// Simulate runs the named policies ("all" for every one) over a workload.
func Simulate(w Workload, names []string, o Options) (Report, error) {
	if len(names) == 1 && names[0] == "all" {
		names = PolicyNames()
	}
	r := Report{Workload: w.Name, Seed: o.Seed}
	for _, n := range names {
		p, err := NewPolicy(n, o)
		if err != nil {
			return Report{}, err
		}
		if f, ok := p.(*Fleetq); ok && (f.bridgePool() > 0 || f.spotPool().Enabled()) {
			// Side by side: fleetq cold (no bridge, no Spot pool), then
			// with them.
			cold := o
			cold.SpotPool = -1
			r.Results = append(r.Results, Run(w, policyMakers[n](cold).(*Fleetq).WithBridge(-1, 0), cold))
			res := Run(w, p, o)
			res.Policy = "fleetq"
			if f.spotPool().Enabled() {
				res.Policy += fmt.Sprintf(" spot-pool=%d", f.spotPool().Size)
			}
			if f.bridgePool() > 0 {
				res.Policy += fmt.Sprintf(" bridge=%d", f.bridgePool())
			}
			r.Results = append(r.Results, res)
			continue
		}
		r.Results = append(r.Results, Run(w, p, o))
	}
	return r, nil
}
