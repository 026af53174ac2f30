package logging

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLoggerWritesJSONAtLevel(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	log, err := New(&b, "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(b.String())), &rec); err != nil {
		t.Fatalf("one JSON line expected, got %q: %v", b.String(), err)
	}
	if rec["msg"] != "shown" || rec["k"] != "v" {
		t.Fatalf("record %v", rec)
	}
	if _, err := New(&b, "loud"); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Fatalf("level loud: %v, want an error naming it", err)
	}
}
