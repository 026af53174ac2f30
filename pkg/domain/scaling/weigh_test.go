package scaling_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

func TestWeighSpot(t *testing.T) {
	types := []string{"g5.xlarge", "g5.2xlarge", "g4dn.xlarge"}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	type tz = scaling.TypeZone
	cases := map[string]struct {
		counts     map[tz]int
		threshold  int
		wantTypes  []string
		wantZones  []string
		wantReason string
	}{
		"no interruptions: configured order, every zone": {
			nil, 3, types, zones, "",
		},
		"an interrupted type goes last": {
			map[tz]int{{"g5.xlarge", "us-east-1a"}: 3, {"g5.xlarge", "us-east-1b"}: 1}, 5,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, zones,
			"spot types: g5.xlarge last (4 interruptions in 1h)",
		},
		"fewest interruptions first, configured order among equals": {
			map[tz]int{{"g5.xlarge", "us-east-1a"}: 2, {"g5.2xlarge", "us-east-1b"}: 1, {"g4dn.xlarge", "us-east-1c"}: 1}, 0,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, zones,
			"spot types: g5.2xlarge, g4dn.xlarge, g5.xlarge last (1, 1, 2 interruptions in 1h)",
		},
		"the last type interrupted keeps its place but is reported": {
			map[tz]int{{"g4dn.xlarge", "us-east-1a"}: 1}, 3,
			types, zones, "spot types: g4dn.xlarge last (1 interruption in 1h)",
		},
		"a zone at the threshold is dropped": {
			map[tz]int{{"g5.xlarge", "us-east-1b"}: 2, {"g5.2xlarge", "us-east-1b"}: 1}, 3,
			[]string{"g4dn.xlarge", "g5.2xlarge", "g5.xlarge"}, []string{"us-east-1a", "us-east-1c"},
			"spot types: g5.2xlarge, g5.xlarge last (1, 2 interruptions in 1h); spot zones: without us-east-1b (3) (3 or more interruptions in 1h)",
		},
		"a zone under the threshold stays": {
			map[tz]int{{"g5.xlarge", "us-east-1b"}: 2}, 3,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, zones,
			"spot types: g5.xlarge last (2 interruptions in 1h)",
		},
		"never every zone: the least interrupted stays": {
			map[tz]int{{"g5.xlarge", "us-east-1a"}: 5, {"g5.xlarge", "us-east-1b"}: 3, {"g5.xlarge", "us-east-1c"}: 4}, 3,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, []string{"us-east-1b"},
			"spot types: g5.xlarge last (12 interruptions in 1h); spot zones: without us-east-1a (5), us-east-1c (4) (3 or more interruptions in 1h), us-east-1b kept as the least interrupted (3)",
		},
		"every zone equally interrupted: the first configured stays": {
			map[tz]int{{"g5.xlarge", "us-east-1a"}: 3, {"g5.xlarge", "us-east-1b"}: 3, {"g5.xlarge", "us-east-1c"}: 3}, 3,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, []string{"us-east-1a"},
			"spot types: g5.xlarge last (9 interruptions in 1h); spot zones: without us-east-1b (3), us-east-1c (3) (3 or more interruptions in 1h), us-east-1a kept as the least interrupted (3)",
		},
		"threshold 0 never drops a zone": {
			map[tz]int{{"g5.xlarge", "us-east-1a"}: 50}, 0,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, zones,
			"spot types: g5.xlarge last (50 interruptions in 1h)",
		},
		"interruptions of types and zones the fleet no longer has are ignored": {
			map[tz]int{{"p3.2xlarge", "us-east-1a"}: 1, {"g5.xlarge", "us-west-2a"}: 9}, 3,
			[]string{"g5.2xlarge", "g4dn.xlarge", "g5.xlarge"}, zones,
			"spot types: g5.xlarge last (9 interruptions in 1h)",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := scaling.WeighInput{Types: types, Zones: zones, Interrupted: c.counts, Window: time.Hour, ZoneThreshold: c.threshold}
			w := scaling.WeighSpot(in)
			if !slices.Equal(w.Types, c.wantTypes) {
				t.Errorf("types = %v, want %v", w.Types, c.wantTypes)
			}
			if !slices.Equal(w.Zones, c.wantZones) {
				t.Errorf("zones = %v, want %v", w.Zones, c.wantZones)
			}
			if w.Reason != c.wantReason {
				t.Errorf("reason = %q\n want %q", w.Reason, c.wantReason)
			}
			if !slices.Equal(types, []string{"g5.xlarge", "g5.2xlarge", "g4dn.xlarge"}) {
				t.Fatalf("input types changed: %v", types)
			}
		})
	}
}

// A zone is taken out of the group's subnets only once no instance runs
// there: Auto Scaling replaces the instances of a removed zone, busy or not.
func TestWeighSpotKeepsAZoneWhileInstancesRunThere(t *testing.T) {
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	in := scaling.WeighInput{Types: []string{"g5.xlarge"}, Zones: zones, Window: time.Hour, ZoneThreshold: 3,
		Interrupted: map[scaling.TypeZone]int{{Type: "g5.xlarge", Zone: "us-east-1b"}: 4},
		Occupied:    map[string]int{"us-east-1a": 1, "us-east-1b": 2}}
	w := scaling.WeighSpot(in)
	if !slices.Equal(w.Zones, zones) {
		t.Errorf("zones = %v, want every zone while us-east-1b has instances", w.Zones)
	}
	if want := "us-east-1b (4 interruptions, 2 instances) kept while instances run there"; !strings.Contains(w.Reason, want) {
		t.Errorf("reason = %q, want it to contain %q", w.Reason, want)
	}
	in.Occupied = map[string]int{"us-east-1a": 1}
	if w := scaling.WeighSpot(in); !slices.Equal(w.Zones, []string{"us-east-1a", "us-east-1c"}) {
		t.Errorf("zones = %v once us-east-1b is empty, want it dropped", w.Zones)
	}
}
