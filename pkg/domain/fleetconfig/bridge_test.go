package fleetconfig

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBridgeInConfig(t *testing.T) {
	cpu := strings.Replace(minimal, "[g5.xlarge]", "[m7i.xlarge]", 1)
	cfg, err := Parse("f.yaml", []byte(cpu+"    max_instances: 8\n    bridge:\n      pool: 4\n      state: hibernated\n      max_minutes: 20\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Fleets[0].Bridge
	if !b.Enabled() || b.Pool != 4 || b.PoolState() != WarmPoolHibernated || b.MaxLife() != 20*time.Minute {
		t.Fatalf("bridge = %+v", b)
	}
	if cfg.Fleets[0].OnDemand.Enabled() {
		t.Fatal("a bridge turned the On-Demand rung on: it needs no fallback")
	}
	cfg, err = Parse("f.yaml", []byte(minimal+"    bridge:\n      pool: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Fleets[0].Bridge; b.PoolState() != WarmPoolStopped || b.MaxLife() != DefaultBridgeMaxMinutes*time.Minute {
		t.Fatalf("defaults = %+v, %s, %s", b, b.PoolState(), b.MaxLife())
	}
	if (Bridge{}).Enabled() {
		t.Fatal("a fleet without bridge has one")
	}
	bad := []struct{ doc, want string }{
		{minimal + "    max_instances: 4\n    bridge:\n      pool: 5\n", "fleets[0].bridge.pool: must be between 0 (no bridge) and max_instances (4), got 5"},
		{minimal + "    bridge:\n      pool: -1\n", "fleets[0].bridge.pool: must be between 0"},
		{minimal + "    bridge:\n      pool: 1\n      state: running\n", `fleets[0].bridge.state: must be stopped or hibernated, got "running"`},
		{minimal + "    bridge:\n      pool: 1\n      max_minutes: 2000\n", "fleets[0].bridge.max_minutes: must be between 1 and 1440"},
		{minimal + "    bridge:\n      pool: 1\n    on_demand:\n      fallback_after: 5m\n      warm_pool:\n        size: 1\n", "fleets[0].bridge: and on_demand.warm_pool both put a warm pool on the On-Demand group"},
	}
	for _, b := range bad {
		_, err := Parse("bad.yaml", []byte(b.doc))
		var verr *ValidationError
		if !errors.As(err, &verr) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v\ndoes not contain %s", err, b.want)
		}
	}
}
