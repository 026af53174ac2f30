package scaler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

func (h *harness) submitFor(tenant string, n int) {
	h.t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%02d", tenant, i)
		if _, _, err := h.sys.Store.CreateJob(h.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// A tenant capped at 2 leased jobs with 50 ready adds 2 jobs of demand, not
// 50: with another tenant's 4 jobs, 6 jobs on 2 slots per instance need 3
// instances, not the fleet's max of 5; the decision says the caps limited it.
func TestScalerSizesToWhatTenantCapsAllow(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, cfgYAML+"tenants:\n  - id: capped\n    max_leased: 2\n  - id: free\n")
	h.submitFor("capped", 50)
	h.submitFor("free", 4)
	r := h.tick()
	if r.Desired != 3 || !strings.Contains(r.Reason.String(), "max_leased") {
		t.Fatalf("desired %d (%s); want 3 with the caps named", r.Desired, r.Reason)
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil || st.LastDecision == nil || st.LastDecision.Inputs.Map()["cap_held"] != 48 {
		t.Fatalf("recorded decision %+v, %v; want cap_held 48", st.LastDecision, err)
	}
}

// Without a cap the same backlog sizes to the whole of it.
func TestScalerSizesToTheWholeBacklogWithoutCaps(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, cfgYAML+"tenants:\n  - id: capped\n  - id: free\n")
	h.submitFor("capped", 50)
	h.submitFor("free", 4)
	if r := h.tick(); r.Desired != 5 || strings.Contains(r.Reason.String(), "max_leased") {
		t.Fatalf("desired %d (%s); want the max of 5", r.Desired, r.Reason)
	}
}
