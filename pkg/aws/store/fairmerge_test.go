package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

func TestFairMergeOrdersJobsAsSuccessivePicks(t *testing.T) {
	settings := map[string]fleetconfig.Tenant{
		"h": {ID: "h", Weight: 2},
		"c": {ID: "c", MaxLeased: 1},
	}
	of := func(id string) fleetconfig.Tenant {
		if t, ok := settings[id]; ok {
			return t
		}
		return fleetconfig.Tenant{ID: id}
	}
	// jobs gives each tenant named in spec (one letter per job) its jobs,
	// created in spec order.
	jobs := func(spec string) []jobItem {
		var out []jobItem
		for i, r := range spec {
			out = append(out, jobItem{JobID: fmt.Sprintf("%c%d", r, i), TenantID: string(r), CreatedMS: int64(i)})
		}
		return out
	}
	cases := []struct {
		name   string
		spec   string
		leased map[string]int
		want   string
	}{
		{"equal weights alternate, oldest tenant first", "aaaaaabb", nil, "ababaaaa"},
		{"leases held elsewhere come first", "aaaabbbb", map[string]int{"a": 2}, "bbababaa"},
		{"weight 2 takes two of every three", "hhhhhhbbb", nil, "hbhhbhhbh"},
		{"a tenant at max_leased goes last", "ccccaa", nil, "caaccc"},
	}
	for _, c := range cases {
		var got strings.Builder
		for _, j := range fairMerge(jobs(c.spec), c.leased, of) {
			got.WriteString(j.TenantID)
		}
		if got.String() != c.want {
			t.Errorf("%s: order %s, want %s", c.name, got.String(), c.want)
		}
	}
}
