package preflight

import (
	"context"
	"fmt"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/version"
)

// WorkerViews reads a fleet's workers as the stage's API shows them to an
// operator (GET /api/admin/workers?fleet=).
type WorkerViews interface {
	Workers(ctx context.Context, apiURL, fleet string) ([]wire.Worker, error)
}

// FirstAttestedRelease is the first release whose agents register in AWS
// by attestation: agents of the releases before it registered with the
// stage-wide fleet secret, which it removed.
const FirstAttestedRelease = "v0.2.0"

// Warn is the verdict of a check that found something to do that does not
// stop the stage working now; it does not fail the run.
const Warn Status = "warn"

// StageSecretAgents warns, per fleet that accepts no secret (its workers
// attest), of the workers whose agent is of a release before
// FirstAttestedRelease: they registered with the stage-wide fleet secret,
// and keep working with their worker token, but the secret is gone, so
// such an agent that restarts can never register again (its instance is
// replaced once it stops answering). Draining them now replaces them with
// instances whose agent attests (docs/deploy.md, "Upgrading a stage").
func StageSecretAgents(ctx context.Context, wv WorkerViews, apiURL string, cfg *fleetconfig.Config) []Result {
	var out []Result
	first := "" // the first fleet checked: a problem reaching the API is told there once
	for _, f := range cfg.Fleets {
		if f.AcceptSecret {
			continue
		}
		if first != "" && len(out) > 0 && out[0].Status == Skip {
			out = append(out, Result{stageSecretCheck(f.Slug), Skip, "see " + first})
			continue
		}
		if first == "" {
			first = stageSecretCheck(f.Slug)
		}
		if apiURL == "" {
			out = append(out, Result{stageSecretCheck(f.Slug), Skip, "the stack has no ApiUrl output"})
			continue
		}
		workers, err := wv.Workers(ctx, apiURL, f.Slug)
		if err != nil {
			out = append(out, Result{stageSecretCheck(f.Slug), Skip, fmt.Sprintf("cannot read the workers (GET %s%s: %v): doctor needs the operator policy (the stack's OperatorPolicyArn output) to check them",
				strings.TrimRight(apiURL, "/"), wire.PathAdminWorkers, err)})
			continue
		}
		var old []string
		for _, w := range workers {
			if w.Status != "revoked" && version.Older(w.AgentVersion, FirstAttestedRelease) {
				old = append(old, w.WorkerID)
			}
		}
		if len(old) == 0 {
			out = append(out, ok(stageSecretCheck(f.Slug), "no worker runs an agent that registered with the stage-wide fleet secret"))
			continue
		}
		out = append(out, Result{stageSecretCheck(f.Slug), Warn, fmt.Sprintf(
			"fleet %s: %d workers run an agent older than %s, registered with the stage-wide fleet secret, which is gone (%s): one that restarts cannot register again; drain them now (POST %s/{worker_id}/drain, or the console's Drain) so instances whose agent attests replace them",
			f.Slug, len(old), FirstAttestedRelease, strings.Join(old, ", "), wire.PathAdminWorkers)})
	}
	return out
}

// stageSecretCheck names the stage-secret agents check of a fleet.
func stageSecretCheck(slug string) string { return "stage-secret agents " + slug }
