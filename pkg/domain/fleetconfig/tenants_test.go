package fleetconfig

import (
	"reflect"
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
		if got := cfg.Tenant(c.id); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Tenant(%q) = %+v, want %+v", c.id, got, c.want)
		}
	}
	plain, err := Parse("plain.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Tenant("acme"); !reflect.DeepEqual(got, Tenant{ID: "acme"}) {
		t.Errorf("without tenants: Tenant(acme) = %+v, want no caps", got)
	}
}

func TestTenantValidation(t *testing.T) {
	cases := []struct {
		name, tenants, want string
	}{
		{"no id", "  - max_queued: 5\n", `tenants[0].id: is required`},
		{"bad id", "  - id: \"a b\"\n", `tenants[0].id: "a b" is not a tenant id`},
		{"case variant", "  - id: ACME\n", `tenants[0].id: "ACME" is not a tenant id`},
		{"trailing dot", "  - id: acme.\n", `tenants[0].id: "acme." is not a tenant id`},
		{"star principals", "  - id: \"*\"\n    principals: [\"arn:aws:iam::123456789012:role/p\"]\n", `tenants[0].principals: the "*" entry acts for no tenant`},
		{"wildcard principal", "  - id: acme\n    principals: [\"arn:aws:iam::123456789012:role/*\"]\n", `tenants[0].principals[0]: "arn:aws:iam::123456789012:role/*" has a wildcard`},
		{"not a principal", "  - id: acme\n    principals: [\"arn:aws:s3:::bucket\"]\n", `tenants[0].principals[0]: "arn:aws:s3:::bucket" is not an IAM role or user ARN`},
		{"principal twice", "  - id: acme\n    principals: [\"arn:aws:iam::123456789012:role/p\"]\n  - id: globex\n    principals: [\"arn:aws:iam::123456789012:role/team/P\"]\n",
			`tenants[1].principals[0]: "arn:aws:iam::123456789012:role/team/P" is already listed as tenants[0].principals[0]`},
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

func TestCallerForMapsPrincipalsToTenantsAndOperators(t *testing.T) {
	doc := minimal + `
operators: ["arn:aws:iam::123456789012:role/fleetq-ops"]
tenants:
  - id: acme
    principals: ["arn:aws:iam::123456789012:role/producers/acme-producer", "arn:aws:iam::123456789012:user/acme-ci"]
  - id: globex
    principals: ["arn:aws:iam::210987654321:role/globex"]
`
	cfg, err := Parse("principals.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for arn, want := range map[string]Caller{
		"arn:aws:sts::123456789012:assumed-role/acme-producer/render-box": {Tenant: "acme"},
		"arn:aws:iam::123456789012:role/producers/acme-producer":          {Tenant: "acme"},
		"arn:aws:iam::123456789012:user/acme-ci":                          {Tenant: "acme"},
		"arn:aws:sts::210987654321:assumed-role/globex/s":                 {Tenant: "globex"},
		"arn:aws:sts::123456789012:assumed-role/fleetq-ops/alice":         {Operator: true},
	} {
		got, ok := cfg.CallerFor(arn)
		if !ok || got != want {
			t.Errorf("CallerFor(%q) = %+v, %v; want %+v", arn, got, ok, want)
		}
	}
	for _, arn := range []string{
		"arn:aws:sts::123456789012:assumed-role/globex/s", // globex's role name, another account
		"arn:aws:sts::123456789012:assumed-role/someone/s",
		"arn:aws:iam::123456789012:user/ops",
		"not an arn",
	} {
		if got, ok := cfg.CallerFor(arn); ok {
			t.Errorf("CallerFor(%q) = %+v, want nobody", arn, got)
		}
	}
}

func TestOperatorsAreValidated(t *testing.T) {
	for doc, want := range map[string]string{
		"operators: [\"ops\"]\n": `operators[0]: "ops" is not an IAM role or user ARN`,
		"operators: [\"arn:aws:iam::123456789012:role/ops\"]\ntenants:\n  - id: acme\n    principals: [\"arn:aws:iam::123456789012:role/ops\"]\n": `tenants[0].principals[0]: "arn:aws:iam::123456789012:role/ops" is already listed as operators[0]`,
	} {
		_, err := Parse("bad.yaml", []byte(minimal+doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to contain %q", err, want)
		}
	}
}
