package main

import (
	"strings"
	"testing"
)

func TestDefaultWorkerIDPerSlot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ machine, slot, want string }{
		{"i-0abc", "", "i-0abc"},
		{"i-0abc", "0", "i-0abc-0"},
		{"i-0abc", "gpu_1", "i-0abc-gpu_1"},
		{"laptop", "a-b", "laptop-a-b"},
	} {
		got, err := defaultWorkerID(c.machine, c.slot)
		if err != nil || got != c.want {
			t.Errorf("defaultWorkerID(%q, %q) = %q, %v; want %q", c.machine, c.slot, got, err, c.want)
		}
	}
	for _, slot := range []string{"a b", "0/1", strings.Repeat("9", 17), "é"} {
		if _, err := defaultWorkerID("i-0abc", slot); err == nil || !strings.Contains(err.Error(), "--slot") {
			t.Errorf("slot %q: err = %v, want one naming --slot", slot, err)
		}
	}
}
