package localaws

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// What on-demand serves a table at once (Developer Guide, "DynamoDB
// on-demand capacity mode", "Initial throughput and scaling properties"):
// a new table 4,000 write units or 12,000 read units a second, or a linear
// combination of both, and up to double the previous peak; the guide's
// example is a table whose peak was 50,000 reads a second taking 100,000 at
// once. The units go to many partition keys, so only the table's limit is
// in play.
func TestCapacityModelHoldsATableToWhatOnDemandServesAtOnce(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	spread := func(c *Capacity, at time.Time, table string, u Units) {
		const keys = 100
		for k := range keys {
			c.charge(at, table, "", fmt.Sprintf("k%d", k), Units{Read: u.Read / keys, Write: u.Write / keys})
		}
	}
	for _, tc := range []struct {
		what    string
		seconds []Units
		over    bool
	}{
		{"a new table at 4,000 write units", []Units{{Write: 4000}}, false},
		{"a new table at 4,040 write units", []Units{{Write: 4040}}, true},
		{"a new table at 12,000 read units", []Units{{Read: 12000}}, false},
		{"a new table at 2,000 write and 6,000 read units", []Units{{Write: 2000, Read: 6000}}, false},
		{"a new table at 2,000 write and 6,100 read units", []Units{{Write: 2000, Read: 6100}}, true},
		{"a peak of 50,000 reads, then 100,000", []Units{{Read: 12000}, {Read: 24000}, {Read: 48000}, {Read: 50000}, {Read: 25000}, {Read: 100000}}, false},
		{"a peak of 50,000 reads, then 101,000", []Units{{Read: 12000}, {Read: 24000}, {Read: 48000}, {Read: 50000}, {Read: 25000}, {Read: 101000}}, true},
		{"a jump past double the peak", []Units{{Write: 3000}, {Write: 6100}}, true},
	} {
		c := NewCapacity()
		for i, u := range tc.seconds {
			spread(c, t0.Add(time.Duration(i)*time.Second), "jobs", u)
		}
		err := c.Err()
		if got := err != nil; got != tc.over {
			t.Errorf("%s: Err() = %v, want over: %v", tc.what, err, tc.over)
		}
		if err != nil && !strings.Contains(err.Error(), "on-demand serves at once") {
			t.Errorf("%s: Err() = %v, want the table named", tc.what, err)
		}
	}
	// An index is held apart from its table.
	c := NewCapacity()
	spread(c, t0, "jobs", Units{Write: 3000})
	for k := range 100 {
		c.charge(t0, "jobs", "by-state", fmt.Sprintf("k%d", k), Units{Write: 30})
	}
	if err := c.Err(); err != nil {
		t.Fatalf("3,000 write units on the table and 3,000 on its index: %v", err)
	}
	if h := c.HottestTable(); h.Units.Write != 3000 || h.Limit.Write != TableInitialWriteUnits {
		t.Fatalf("HottestTable() = %v, want 3,000 of 4,000 write units", h)
	}
}
