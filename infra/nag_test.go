package infra_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// nagDir holds the Node project that runs cdk-nag (scripts/nag).
var nagDir = filepath.Join("..", "scripts", "nag")

// nagFinding is one finding scripts/nag/nag.mjs prints.
type nagFinding struct {
	Template, Pack, Rule, Level, Resource, Finding, Info string
}

// ensureNag installs scripts/nag's locked packages when they are missing or
// older than the lockfile (`make test` does it first, so this runs once).
func ensureNag(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.Unavailable(t, "npm is not installed: cdk-nag's rule packs run on Node (22+); install Node to check the templates")
	}
	lock, err := os.Stat(filepath.Join(nagDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if inst, err := os.Stat(filepath.Join(nagDir, "node_modules", ".package-lock.json")); err == nil && !inst.ModTime().Before(lock.ModTime()) {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = nagDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", nagDir, err, out)
	}
}

// Every finding of cdk-nag's AwsSolutions and Serverless packs on the dev
// and prod templates is fixed, or suppressed with its reason next to the
// resource (docs/deploy.md lists them).
func TestCdkNag(t *testing.T) {
	ensureNag(t)
	dir := t.TempDir()
	var files []string
	for _, stage := range []string{"dev", "prod", "prod-on-demand", "prod-warm-pool", "prod-spot-pool"} {
		var s synthesized
		switch stage {
		case "prod-spot-pool":
			s = synthSpotPool(t)
		case "prod-on-demand":
			s = synthOnDemand(t)
		case "prod-warm-pool":
			s = synthOnDemandWith(t, "prod-warm-pool-hibernated", "      warm_pool:\n        size: 2\n        state: hibernated\n")
		default:
			s = synth(t, stage)
		}
		b, err := json.Marshal(s.json)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, stage+".template.json")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	cmd := exec.Command("node", append([]string{"nag.mjs"}, files...)...)
	cmd.Dir = nagDir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nag.mjs: %v\n%s", err, out)
	}
	var findings []nagFinding
	if err := json.Unmarshal(out, &findings); err != nil {
		t.Fatalf("nag.mjs output: %v\n%s", err, out)
	}
	for _, f := range findings {
		t.Errorf("%s %s %s on %s: %s", filepath.Base(f.Template), f.Level, f.Rule, strings.TrimPrefix(f.Resource, "Checked/Template/"), f.Info)
	}
}
