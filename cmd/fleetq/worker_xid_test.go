package main

import (
	"slices"
	"strings"
	"testing"
)

func TestXidLogFlags(t *testing.T) {
	t.Parallel()
	x, err := xidLog("dmesg", "")
	if err != nil || x == nil || x.Command != "dmesg" || x.Path != "" || x.Fatal != nil {
		t.Fatalf("default: %+v, %v", x, err)
	}
	x, err = xidLog("file:/var/log/kern.log", "79, 48")
	if err != nil || x.Path != "/var/log/kern.log" || x.Command != "" || !slices.Equal(x.Fatal, []int{79, 48}) {
		t.Fatalf("file: %+v, %v", x, err)
	}
	for _, off := range []string{"none", ""} {
		if x, err := xidLog(off, ""); err != nil || x != nil {
			t.Fatalf("%q: %+v, %v", off, x, err)
		}
	}
	for _, bad := range [][2]string{{"file:", ""}, {"dmesg", "79,fallen"}, {"dmesg", "-3"}} {
		if _, err := xidLog(bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), "--xid-") {
			t.Fatalf("%q %q: %v", bad[0], bad[1], err)
		}
	}
}
