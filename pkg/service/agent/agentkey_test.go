package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetq/fleetq/pkg/service/agent"
)

// The key is made once per worker id and read back on every start; another
// worker id on the same machine gets its own.
func TestAgentKeyKeptAcrossStarts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	k1, err := agent.LoadAgentKey(dir, "i-1-0")
	if err != nil || len(k1) < 16 {
		t.Fatalf("first start: %q, %v", k1, err)
	}
	k2, err := agent.LoadAgentKey(dir, "i-1-0")
	if err != nil || k2 != k1 {
		t.Fatalf("restart read %q (%v), want the same key %q", k2, err, k1)
	}
	other, err := agent.LoadAgentKey(dir, "i-1-1")
	if err != nil || other == k1 {
		t.Fatalf("second slot's key %q (%v) must differ from the first's", other, err)
	}
	info, err := os.Stat(filepath.Join(dir, "agent-i-1-0.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v, %v", info, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent-i-1-0.key"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.LoadAgentKey(dir, "i-1-0"); err == nil {
		t.Fatal("a damaged key file was accepted")
	}
}
