package system_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

func TestEnableWebhooksGivesTheRelayADelivererOnlyWithAllowedHosts(t *testing.T) {
	t.Parallel()
	db, table := testenv.DynamoDB(t)
	log := slog.New(slog.DiscardHandler)
	env := func(hosts []string, withRelay bool) *system.Env {
		cfg := fleetconfig.Default()
		cfg.Webhooks.AllowedHosts = hosts
		var events jobevent.Publisher
		if withRelay {
			events = &jobevents.Bus{}
		}
		e, err := system.New(cfg, db, table, clock.Real{}, log, events)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	keys, err := signing.NewStatic("webhook-key")
	if err != nil {
		t.Fatal(err)
	}
	none := env(nil, true)
	if err := system.EnableWebhooks(none, keys, webhook.Guard{}); err != nil || none.Relay.Callbacks() != nil {
		t.Fatalf("no allowed hosts: %v, callbacks %v", err, none.Relay.Callbacks())
	}
	some := env([]string{"hooks.example.com"}, true)
	if err := system.EnableWebhooks(some, keys, webhook.Guard{}); err != nil {
		t.Fatal(err)
	}
	d, ok := some.Relay.Callbacks().(*webhook.Deliverer)
	// Its attempts and timeout follow the stage's webhooks config
	// (pkg/service/webhook's callbacks tests).
	if !ok || d == nil {
		t.Fatalf("deliverer %+v", some.Relay.Callbacks())
	}
	if err := system.EnableWebhooks(env([]string{"hooks.example.com"}, false), keys, webhook.Guard{}); err == nil || !strings.Contains(err.Error(), "ride the relay") {
		t.Fatalf("without a relay: %v", err)
	}
}
