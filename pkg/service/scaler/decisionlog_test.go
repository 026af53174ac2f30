package scaler_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// The tick's log line says the decision's reason in its words and its
// code, as recorded.
func TestDecisionLogLineSaysTheReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var out bytes.Buffer
	sc, err := scaler.New(h.sys.Store.Config(), h.sys.Store, h.clock, slog.New(slog.NewJSONHandler(&out, nil)), h.scfg)
	if err != nil {
		t.Fatal(err)
	}
	h.submit(3, "j")
	if _, err := sc.Tick(h.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil || st.LastDecision == nil {
		t.Fatalf("state %+v, %v", st, err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		var l struct {
			Msg        string `json:"msg"`
			Reason     string `json:"reason"`
			ReasonCode string `json:"reason_code"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "scaling decision" {
			continue
		}
		if l.Reason != st.LastDecision.Reason.String() || l.ReasonCode != "grow" {
			t.Fatalf("logged reason %q (%q), recorded %q", l.Reason, l.ReasonCode, st.LastDecision.Reason)
		}
		return
	}
	t.Fatalf("no scaling decision logged with its reason in words:\n%s", out.String())
}
