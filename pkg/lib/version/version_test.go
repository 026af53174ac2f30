package version

import "testing"

func TestOlder(t *testing.T) {
	cases := []struct {
		agent, api string
		older      bool
	}{
		{"v1.2.2", "v1.2.3", true},
		{"v1.9.9", "v2.0.0", true},
		{"v1.2.3", "v1.2.3", false},
		{"v1.2.3-dirty", "v1.2.3", false},
		{"v1.2.4", "v1.2.3", false},
		{"v1.2.3", "v1.2.3-4-gabc1234", true},
		{"v1.2.3-4-gabc1234", "v1.2.3-5-gdef5678", true},
		{"v1.2.3-5-gdef5678", "v1.2.3-4-gabc1234", false},
		{"v1.10.0", "v1.9.0", false},
		{"", "v1.2.3", false},
		{"", "dev", false},
		{"v1.0.0", "dev", false},
		{"dev", "v1.2.3", false},
		{"abc1234", "v1.2.3", false},
		{"v1.2", "v1.2.3", false},
	}
	for _, c := range cases {
		if got := Older(c.agent, c.api); got != c.older {
			t.Errorf("Older(%q, %q) = %v, want %v", c.agent, c.api, got, c.older)
		}
	}
}

func TestParse(t *testing.T) {
	r, ok := Parse("v2.10.3-17-g0123abc-dirty")
	if !ok || r != (Release{Major: 2, Minor: 10, Patch: 3, Commits: 17}) {
		t.Fatalf("Parse = %+v, %v", r, ok)
	}
	for _, bad := range []string{"", "dev", "2.1.0", "v2.1.0-rc.1", "v2.1.0-3", "v2.1.0 "} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
