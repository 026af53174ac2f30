package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// FleetViews reads the stage's fleets as its API shows them to an
// operator (GET /api/admin/fleets).
type FleetViews interface {
	Fleets(ctx context.Context, apiURL string) ([]wire.Fleet, error)
}

// BootProblems reports, per fleet, the instances that said at boot that
// they cannot run the fleet's runner (POST /api/worker/boot-report, kept a
// day): such a fleet boots instances that never register, so the check
// fails until its image has the runner. Fleets the API cannot be asked
// about are skipped (an operator credential is needed).
func BootProblems(ctx context.Context, fv FleetViews, apiURL string, cfg *fleetconfig.Config) []Result {
	check := runnerCheck
	skipAll := func(why string) []Result {
		var out []Result
		for i, f := range cfg.Fleets {
			if i > 0 {
				why = "see runner " + cfg.Fleets[0].Slug
			}
			out = append(out, Result{check(f.Slug), Skip, why})
		}
		return out
	}
	if apiURL == "" {
		return skipAll("the stack has no ApiUrl output")
	}
	views, err := fv.Fleets(ctx, apiURL)
	if err != nil {
		return skipAll(fmt.Sprintf("cannot read the fleets' boot reports (GET %s%s: %v): doctor needs the operator policy (the stack's OperatorPolicyArn output) to check them",
			strings.TrimRight(apiURL, "/"), wire.PathAdminFleets, err))
	}
	byFleet := map[string]wire.Fleet{}
	for _, v := range views {
		byFleet[v.FleetSlug] = v
	}
	var out []Result
	for _, f := range cfg.Fleets {
		var missing []wire.BootProblem
		for _, p := range byFleet[f.Slug].BootProblems {
			if p.Problem == wire.BootProblemRunnerMissing {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			out = append(out, ok(check(f.Slug), "no instance reported its runner missing in the last day"))
			continue
		}
		out = append(out, fail(check(f.Slug), "%s: bake the runner into the fleet's image (docs/deploy.md, \"Worker images\") or fix its agent settings",
			RunnerMissingSummary(f.Slug, missing)))
	}
	return out
}

// runnerCheck names the runner check of a fleet.
func runnerCheck(slug string) string { return "runner " + slug }

// RunnerMissingSummary says which instances of a fleet reported their
// runner missing, grouped by what they said and their image, the largest
// group first: `fleet comfy: 2 instances report runner missing: <message>
// (image ami-…)`.
func RunnerMissingSummary(fleet string, reports []wire.BootProblem) string {
	type group struct {
		message, image string
		n              int
	}
	var groups []*group
	for _, r := range reports {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.message == r.Message && g.image == r.ImageID })
		if i < 0 {
			groups = append(groups, &group{message: r.Message, image: r.ImageID})
			i = len(groups) - 1
		}
		groups[i].n++
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return b.n - a.n })
	var parts []string
	for i, g := range groups {
		image := g.image
		if image == "" {
			image = "unknown"
		}
		who := fmt.Sprintf("%d instances report", g.n)
		if g.n == 1 {
			who = "1 instance reports"
		}
		if i == 0 {
			who += " runner missing"
		}
		parts = append(parts, fmt.Sprintf("%s: %s (image %s)", who, g.message, image))
	}
	return "fleet " + fleet + ": " + strings.Join(parts, "; ")
}
