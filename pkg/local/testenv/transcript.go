package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Transcript is a release's recorded agent protocol: every request the
// agent of that release sent to the API and what it was answered
// (pkg/domain/wire/testdata/release-vX.Y.Z/agent-transcript.json). The
// API's tests replay it against today's API; the agent's tests play its
// answers to today's agent.
type Transcript struct {
	Version string `json:"version"`
	// Config is the dev stack's config the transcript was recorded on;
	// the replay starts its stack with the same one.
	Config    string     `json:"config"`
	Exchanges []Exchange `json:"exchanges"`
}

// Exchange is one request and its answer.
type Exchange struct {
	// Step says what the scenario did; Call names the agent client's
	// method that sent it ("" for the operator's setup steps).
	Step string `json:"step"`
	Call string `json:"call,omitempty"`
	// Worker is whose token the request carried (auth "worker").
	Worker string `json:"worker,omitempty"`
	// Auth is "fleet-secret", "worker", "operator" or "none".
	Auth     string          `json:"auth"`
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Request  json.RawMessage `json:"request,omitempty"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response,omitempty"`
}

// TranscriptFile is the name of a release's transcript in its directory.
const TranscriptFile = "agent-transcript.json"

// ReleaseDir matches the directory of a release's fixtures: release-vX.Y.Z.
var ReleaseDir = regexp.MustCompile(`^release-v\d+\.\d+\.\d+$`)

// EachReleaseTranscript runs f as a subtest on the transcript of every
// release under dir, read and decoded; a dir without any fails the test.
func EachReleaseTranscript(t *testing.T, dir string, f func(t *testing.T, file string, tr Transcript)) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !ReleaseDir.MatchString(e.Name()) {
			continue
		}
		n++
		file := filepath.Join(dir, e.Name(), TranscriptFile)
		t.Run(e.Name(), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tr Transcript
			if err := json.Unmarshal(raw, &tr); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			f(t, file, tr)
		})
	}
	if n == 0 {
		t.Fatalf("no %s/release-v*: the last release's agent transcript is missing", dir)
	}
}
