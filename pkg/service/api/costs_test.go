package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

func TestAFinishedJobShowsItsCostAndTheCostsRouteTotalsIt(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, func(o *devstack.Options) {
		o.Clock = clk
		o.Config.Prices = fleetconfig.Prices{Overhead: 0.5, InstanceTypes: map[string]fleetconfig.InstancePrice{"g5.xlarge": {OnDemand: 1.2, Spot: 0.4}}}
	})
	r := h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "max_concurrency": 2,
		"instance_id": "i-w1", "instance_type": "g5.xlarge", "purchase_option": "on-demand"})
	h.want(r, 201, "")
	token := r.body["token"].(string)
	h.want(h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "w2", "fleet_slug": "gpu", "stage": "test", "purchase_option": "reserved"}), 400, "invalid_argument")

	id := h.submit(map[string]any{"tenant_id": "acme", "workflow_id": "wf-a", "input": map[string]any{}})
	l, pr := h.poll(token)
	h.want(pr, 200, "")
	if got := h.job(id)["cost_usd"]; got != nil {
		t.Fatalf("a running job has cost_usd %v", got)
	}
	clk.Advance(20 * time.Minute)
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": l.id, "lease_token": l.token, "result": map[string]any{}}), 200, "")

	// On-Demand $1.20/h, one slot of two, 20 minutes, 50% boot and idle.
	want := 1.2 / 2 * (20.0 / 60) * 1.5
	if got, ok := h.job(id)["cost_usd"].(float64); !ok || fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", want) {
		t.Fatalf("cost_usd = %v, want %.6f", h.job(id)["cost_usd"], want)
	}
	c := h.do("GET", "/api/admin/costs?since=24h", "op", nil)
	h.want(c, 200, "")
	groups := c.body["groups"].([]any)
	if len(groups) != 1 {
		t.Fatalf("groups = %s", c.raw)
	}
	g := groups[0].(map[string]any)
	if g["tenant_id"] != "acme" || g["fleet_slug"] != "gpu" || g["workflow_id"] != "wf-a" || g["jobs"] != 1.0 || fmt.Sprintf("%.6f", g["cost_usd"]) != fmt.Sprintf("%.6f", want) {
		t.Fatalf("group = %s", c.raw)
	}
	h.want(h.do("GET", "/api/admin/costs?since=soon", "op", nil), 400, "invalid_argument")
}

// A fleet with a stopped Spot pool bills its volumes every hour: the costs
// route gives each such fleet's, for a day and for the window, apart from
// the jobs' total; a fleet without a pool has none.
func TestTheCostsRouteGivesEachSpotPoolsVolumes(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC))
	h := newHarness(t, func(o *devstack.Options) {
		o.Clock = clk
		o.Config.Fleets[0].SpotPool = fleetconfig.SpotPool{Size: 12, VolumeGB: 60, MaxAgeHours: 168, AvoidMinutes: 15}
	})
	c := h.do("GET", "/api/admin/costs?since=24h", "op", nil)
	h.want(c, 200, "")
	pools, _ := c.body["pool_volumes"].([]any)
	if len(pools) != 1 {
		t.Fatalf("pool_volumes = %s: want the one fleet with a pool", c.raw)
	}
	p := pools[0].(map[string]any)
	// 12 × 60 GB at $0.08 a GB-month: $0.063123 a day; the window is 24.5
	// hours (since rounds down to the hour).
	day, window := 720*0.08*24/730, 720*0.08*24.5/730
	if p["fleet_slug"] != "gpu" || p["instances"] != 12.0 || p["volume_gb"] != 60.0 ||
		fmt.Sprintf("%.6f", p["usd_per_day"]) != fmt.Sprintf("%.6f", day) || fmt.Sprintf("%.6f", p["usd"]) != fmt.Sprintf("%.6f", window) {
		t.Fatalf("pool_volumes = %s, want $%.6f a day, $%.6f in the window", c.raw, day, window)
	}
	if c.body["total_usd"] != 0.0 {
		t.Fatalf("total_usd = %v: the volumes are not the jobs' total", c.body["total_usd"])
	}
}
