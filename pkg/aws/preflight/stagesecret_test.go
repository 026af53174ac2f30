package preflight_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/preflight"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// workerViews answers each fleet's workers as an operator reads them.
type workerViews map[string][]wire.Worker

func (v workerViews) Workers(_ context.Context, _, fleet string) ([]wire.Worker, error) {
	ws, ok := v[fleet]
	if !ok {
		return nil, errors.New("403 permission_denied")
	}
	return ws, nil
}

// After the release that removed the stage-wide fleet secret, a worker of
// a fleet that accepts no secret whose agent is older than that release
// registered with the removed secret: doctor warns of it, by name, with
// what to do; a fleet whose workers may use a secret of their own, newer
// agents and revoked workers are not warned of.
func TestDoctorWarnsOfAgentsRegisteredWithTheStageWideSecret(t *testing.T) {
	t.Parallel()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(`stage: test
region: us-east-1
network: {vpc_cidr: 10.0.0.0/16}
fleets:
  - slug: attested
    workflows: [a]
    instance_types: [g5.xlarge]
  - slug: onprem
    workflows: [b]
    instance_types: [g5.xlarge]
    accept_secret: true
`))
	if err != nil {
		t.Fatal(err)
	}
	views := workerViews{
		"attested": {
			{WorkerID: "i-old", Status: "active", AgentVersion: "v0.1.0"},
			{WorkerID: "i-old-build", Status: "draining", AgentVersion: "v0.1.0-12-g72ed7cb"},
			{WorkerID: "i-revoked", Status: "revoked", AgentVersion: "v0.1.0"},
			{WorkerID: "i-new", Status: "active", AgentVersion: "v0.2.0"},
		},
		"onprem": {{WorkerID: "box-1", Status: "active", AgentVersion: "v0.1.0"}},
	}
	rs := preflight.StageSecretAgents(context.Background(), views, "https://api.example", cfg)
	if len(rs) != 1 {
		t.Fatalf("results %+v, want one for the attested fleet", rs)
	}
	r := rs[0]
	if r.Status != preflight.Warn || r.Check != "stage-secret agents attested" || !strings.Contains(r.Message, "2 workers") ||
		!strings.Contains(r.Message, "i-old, i-old-build") || !strings.Contains(r.Message, "drain") || strings.Contains(r.Message, "i-revoked") {
		t.Errorf("result %+v", r)
	}
	if preflight.Failed(rs) {
		t.Error("a warning fails the run")
	}

	views["attested"] = []wire.Worker{{WorkerID: "i-new", Status: "active", AgentVersion: "v0.2.0"}}
	if rs := preflight.StageSecretAgents(context.Background(), views, "https://api.example", cfg); len(rs) != 1 || rs[0].Status != preflight.OK {
		t.Errorf("only new agents: %+v", rs)
	}
	delete(views, "attested")
	if rs := preflight.StageSecretAgents(context.Background(), views, "https://api.example", cfg); len(rs) != 1 || rs[0].Status != preflight.Skip {
		t.Errorf("workers unreadable: %+v", rs)
	}
}
