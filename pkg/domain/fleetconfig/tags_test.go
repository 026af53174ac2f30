package fleetconfig

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestFleetTagsMergeTheStagesAndTheFleets(t *testing.T) {
	cfg, err := Parse("tags.yaml", []byte("tags: {team: ml, cost-center: \"42\"}\n"+minimal+"    tags: {cost-center: \"7\", project: video}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.FleetTags(cfg.Fleets[0])
	want := map[string]string{"team": "ml", "cost-center": "7", "project": "video"}
	if !maps.Equal(got, want) {
		t.Errorf("FleetTags = %v, want %v", got, want)
	}
	if cfg.Tags["cost-center"] != "42" {
		t.Errorf("merging changed the stage's tags: %v", cfg.Tags)
	}
}

func TestTagsRefused(t *testing.T) {
	many := "    tags: {"
	for i := range MaxUserTags + 1 {
		many += fmt.Sprintf("k%d: v, ", i)
	}
	many = strings.TrimSuffix(many, ", ") + "}\n"
	cases := map[string]struct{ doc, want string }{
		"aws prefix":   {"tags: {\"aws:owner\": me}\n" + minimal, `tags["aws:owner"]: the aws: prefix is reserved by AWS`},
		"fleetq's own": {minimal + "    tags: {\"fleetq:stage\": other}\n", `fleets[0].tags["fleetq:stage"]: fleetq sets Name and the fleetq: tags itself`},
		"Name":         {"tags: {Name: box}\n" + minimal, `tags["Name"]: fleetq sets Name`},
		"long value":   {"tags: {team: " + strings.Repeat("x", 257) + "}\n" + minimal, `tags["team"]: a tag value must have at most 256 characters`},
		"long key":     {"tags: {" + strings.Repeat("k", 129) + ": v}\n" + minimal, "a tag key must have 1 to 128 characters"},
		"too many":     {minimal + many, fmt.Sprintf("fleets[0].tags: the stage's and the fleet's tags come to %d, more than %d", MaxUserTags+1, MaxUserTags)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
