package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// bootReport sends a runner_missing report for workerID into fleet with
// headers.
func (h *harness) bootReport(headers map[string]string, fleet, workerID string, extra map[string]any) reply {
	h.t.Helper()
	body := map[string]any{"worker_id": workerID, "fleet_slug": fleet, "stage": "test", "problem": "runner_missing",
		"message": "exec runner: /opt/render/bin/run-scene does not exist on this machine: install it in the image"}
	for k, v := range extra {
		body[k] = v
	}
	return h.send("POST", wire.PathBootReport, headers, body)
}

// bootProblems are a fleet's boot problems as GET /api/admin/fleets shows them.
func (h *harness) bootProblems(fleet string) []any {
	h.t.Helper()
	r := h.do("GET", wire.PathAdminFleets, "op", nil)
	h.want(r, 200, "")
	for _, f := range r.body["fleets"].([]any) {
		if f := f.(map[string]any); f["fleet_slug"] == fleet {
			ps, _ := f["boot_problems"].([]any)
			return ps
		}
	}
	h.t.Fatalf("no fleet %s in %s", fleet, r.raw)
	return nil
}

// An attested instance reports that its image lacks its runner: the report
// is on its fleet, with its image, and nothing is registered.
func TestBootReportIsRecordedOnItsFleet(t *testing.T) {
	t.Parallel()
	h := newAttested(t)
	gpu := h.instances["gpu"]
	id := func() map[string]string {
		return map[string]string{wire.HeaderIdentity: wire.EncodeIdentity(h.identity("gpu", gpu, "test"))}
	}
	r := h.bootReport(id(), "gpu", gpu, map[string]any{"image_id": "ami-0123456789abcdef0", "instance_type": "g5.xlarge", "agent_version": "v1.2.3"})
	h.want(r, 200, "")
	if r.body["status"] != "recorded" || r.body["token"] != nil {
		t.Fatalf("answer %s", r.raw)
	}
	ps := h.bootProblems("gpu")
	if len(ps) != 1 {
		t.Fatalf("boot problems %v, want one", ps)
	}
	p := ps[0].(map[string]any)
	if p["instance_id"] != gpu || p["worker_id"] != gpu || p["image_id"] != "ami-0123456789abcdef0" || p["problem"] != "runner_missing" ||
		!strings.Contains(p["message"].(string), "run-scene does not exist") || !reportedAt(p).Equal(h.clock.Now()) {
		t.Errorf("boot problem %v", p)
	}
	if ps := h.bootProblems("approval"); len(ps) != 0 {
		t.Errorf("fleet approval shows %v", ps)
	}
	if ws := h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any); len(ws) != 0 {
		t.Errorf("workers %v after a boot report", ws)
	}
	// The same instance reporting again replaces its report; a day later
	// it is no longer shown.
	h.clock.Advance(time.Minute)
	h.want(h.bootReport(id(), "gpu", gpu, nil), 200, "")
	if ps := h.bootProblems("gpu"); len(ps) != 1 || ps[0].(map[string]any)["image_id"] != nil {
		t.Errorf("after a second report: %v", ps)
	}
	h.clock.Advance(24*time.Hour + time.Second)
	if ps := h.bootProblems("gpu"); len(ps) != 0 {
		t.Errorf("a day later: %v", ps)
	}
}

// A boot report speaks for the caller's own instance of its own fleet: an
// instance of another fleet, another instance's worker id or instance id,
// a stale or other stage's identity, another fleet's secret, a worker
// token or no credential are refused, and nothing is recorded.
func TestBootReportOnlyForItsOwnInstanceAndFleet(t *testing.T) {
	t.Parallel()
	h := newAttested(t)
	gpu, other := h.instances["gpu"], h.instances["approval"]
	ident := func(fleet, instance, stage string) map[string]string {
		return map[string]string{wire.HeaderIdentity: wire.EncodeIdentity(h.identity(fleet, instance, stage))}
	}
	// The wrong fleet.
	h.want(h.bootReport(ident("approval", other, "test"), "gpu", other, nil), 403, "permission_denied")
	h.want(h.bootReport(ident("approval", gpu, "test"), "gpu", gpu, nil), 403, "permission_denied")
	// The wrong worker: another instance's worker id or instance id.
	h.want(h.bootReport(ident("gpu", gpu, "test"), "gpu", other, nil), 403, "permission_denied")
	h.want(h.bootReport(ident("gpu", gpu, "test"), "gpu", gpu, map[string]any{"instance_id": other}), 403, "permission_denied")
	// Nobody, or not a registration's credential.
	h.want(h.bootReport(nil, "gpu", gpu, nil), 401, "unauthenticated")
	h.want(h.bootReport(map[string]string{wire.HeaderFleetSecret: "not-a-secret"}, "gpu", gpu, nil), 401, "unauthenticated")
	h.want(h.bootReport(map[string]string{wire.HeaderFleetSecret: secretOf("approval")}, "gpu", "w1", nil), 401, "unauthenticated")
	reg := h.do("POST", wire.PathRegister, "secret", map[string]any{"worker_id": "w9", "fleet_slug": "gpu", "stage": "test"})
	h.want(reg, 201, "")
	h.want(h.bootReport(map[string]string{"Authorization": "Bearer " + reg.body["token"].(string)}, "gpu", "w9", nil), 401, "unauthenticated")
	h.want(h.bootReport(ident("gpu", gpu, "prod"), "gpu", gpu, nil), 401, "unauthenticated")
	stale := ident("gpu", gpu, "test")
	h.clock.Advance(6 * time.Minute)
	h.want(h.bootReport(stale, "gpu", gpu, nil), 401, "unauthenticated")
	// Bad bodies change nothing either.
	h.want(h.bootReport(ident("gpu", gpu, "test"), "gpu", gpu, map[string]any{"problem": "gpu_sick"}), 400, "invalid_argument")
	h.want(h.bootReport(ident("gpu", gpu, "test"), "gpu", gpu, map[string]any{"message": ""}), 400, "invalid_argument")
	h.want(h.bootReport(ident("gpu", gpu, "test"), "gpu", gpu, map[string]any{"stage": "prod"}), 400, "invalid_argument")
	h.want(h.bootReport(ident("gpu", gpu, "test"), "nope", gpu, nil), 404, "not_found")
	for _, f := range []string{"gpu", "approval"} {
		if ps := h.bootProblems(f); len(ps) != 0 {
			t.Fatalf("fleet %s shows %v after refused reports", f, ps)
		}
	}
	// A fleet's secret speaks for that fleet (workers outside AWS).
	h.want(h.bootReport(map[string]string{wire.HeaderFleetSecret: secretOf("gpu")}, "gpu", "w1", nil), 200, "")
	if ps := h.bootProblems("gpu"); len(ps) != 1 || ps[0].(map[string]any)["instance_id"] != "w1" {
		t.Fatalf("after a report by gpu's secret: %v", ps)
	}
}

func reportedAt(p map[string]any) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, p["reported_at"].(string))
	return at
}
