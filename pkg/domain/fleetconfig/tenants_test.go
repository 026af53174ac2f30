package fleetconfig

import (
	"strings"
	"testing"
)

func TestTenantSettingsFallBackToTheStarEntry(t *testing.T) {
	doc := minimal + `
tenants:
  - id: acme
    max_queued: 100
    max_leased: 4
    weight: 3
  - id: "*"
    max_queued: 10
`
	cfg, err := Parse("tenants.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	cases := []struct {
		id   string
		want Tenant
	}{
		{"acme", Tenant{ID: "acme", MaxQueued: 100, MaxLeased: 4, Weight: 3}},
		{"globex", Tenant{ID: "globex", MaxQueued: 10}},
	}
	for _, c := range cases {
		if got := cfg.Tenant(c.id); got != c.want {
			t.Errorf("Tenant(%q) = %+v, want %+v", c.id, got, c.want)
		}
	}
	plain, err := Parse("plain.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Tenant("acme"); got != (Tenant{ID: "acme"}) {
		t.Errorf("without tenants: Tenant(acme) = %+v, want no caps", got)
	}
}

func TestTenantValidation(t *testing.T) {
	cases := []struct {
		name, tenants, want string
	}{
		{"no id", "  - max_queued: 5\n", `tenants[0].id: is required`},
		{"bad id", "  - id: \"a b\"\n", `tenants[0].id: "a b" must be 1-128 letters`},
		{"twice", "  - id: acme\n  - id: acme\n", `tenants[1].id: "acme" is already listed as tenants[0]`},
		{"negative cap", "  - id: acme\n    max_queued: -1\n", "tenants[0].max_queued: must be between 0 and 1000000, got -1"},
		{"negative leased", "  - id: acme\n    max_leased: -2\n", "tenants[0].max_leased: must be between 0 and 1000000, got -2"},
		{"heavy weight", "  - id: acme\n    weight: 5000\n", "tenants[0].weight: must be between 0 (meaning 1) and 1000, got 5000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(minimal+"tenants:\n"+c.tenants))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestPricesValidation(t *testing.T) {
	ok := minimal + "prices:\n  overhead: 0.15\n  instance_types:\n    g5.xlarge: {on_demand: 1.006, spot: 0.45}\n"
	cfg, err := Parse("prices.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Prices.InstanceTypes["g5.xlarge"]; p.OnDemand != 1.006 || p.Spot != 0.45 || cfg.Prices.Overhead != 0.15 {
		t.Fatalf("prices = %+v", cfg.Prices)
	}
	cases := []struct{ name, prices, want string }{
		{"bad type", "  instance_types:\n    big: {on_demand: 1}\n", `prices.instance_types.big: "big" is not an EC2 instance type`},
		{"negative", "  instance_types:\n    g5.xlarge: {spot: -1}\n", "prices.instance_types.g5.xlarge.spot: must be between 0 and 1000 dollars an hour, got -1"},
		{"overhead", "  overhead: 20\n", "prices.overhead: must be between 0 and 10"},
	}
	for _, c := range cases {
		if _, err := Parse("bad.yaml", []byte(minimal+"prices:\n"+c.prices)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want %q", c.name, err, c.want)
		}
	}
}
