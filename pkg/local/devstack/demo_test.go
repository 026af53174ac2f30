package devstack_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// The local fleet end to end, with the real agent on every local instance:
// a burst from zero scales the fleet up, every job succeeds, no busy worker
// is killed, and the fleet is back to zero after the idle window. The
// fleet takes no secret: every local instance registers through the
// attested path, its agent signing with the credentials the embedded STS
// issued to that instance.
func TestDemoScalesFromZeroAndBack(t *testing.T) {
	t.Parallel()
	cfg := fleetconfig.Default()
	for i := range cfg.Fleets {
		cfg.Fleets[i].IdleWindow = fleetconfig.Duration(3 * time.Second)
		cfg.Fleets[i].ScaleInGrace = fleetconfig.Duration(time.Second)
		cfg.Fleets[i].AcceptSecret = false
	}
	stack, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: cfg, Logger: slog.New(slog.DiscardHandler), DynamoDBEndpoint: testenv.StackDynamoDB(t),
		Fleet: devstack.FleetOptions{Tick: time.Second, BootDelay: time.Second, LocalAgents: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	var out bytes.Buffer
	sum, err := stack.RunDemo(context.Background(), devstack.DemoOptions{Jobs: 8, MinSeconds: 1, MaxSeconds: 2, Out: &out, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sum.Succeeded != 8 || sum.Lost != 0 || sum.KilledBusy != 0 || sum.PeakInstances < 2 || sum.FirstLease <= 0 {
		t.Fatalf("summary %s\n%s", sum, out.String())
	}
	if len(stack.FleetSecrets) != 0 || stack.STS.Calls() < sum.PeakInstances {
		t.Fatalf("fleet secrets %v, %d identity requests for %d instances: want attested registrations only", stack.FleetSecrets, stack.STS.Calls(), sum.PeakInstances)
	}
	if !strings.Contains(out.String(), "8/8") {
		t.Fatalf("table:\n%s", out.String())
	}
	st, err := stack.Store.GetFleetState(context.Background(), "demo")
	if err != nil || st.LastDecision == nil || !strings.HasPrefix(st.LastDecision.Reason.String(), "shrink") && !strings.HasPrefix(st.LastDecision.Reason.String(), "hold 0") {
		t.Fatalf("last decision %+v, %v", st.LastDecision, err)
	}
}
