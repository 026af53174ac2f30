package scaling_test

import (
	"fmt"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// The worked example of docs/scaling.md: a fleet of 2-slot instances gets a
// burst of nine jobs, works through it, and goes back to zero.
func ExampleDecide() {
	s := scaling.Settings{Slots: 2, Min: 0, Max: 10, IdleWindow: 15 * time.Minute,
		ScaleInGrace: 2 * time.Minute, BootTimeout: 10 * time.Minute, Unresponsive: 90 * time.Second}
	at := func(hhmm string) time.Time {
		t, _ := time.Parse("15:04", hhmm)
		return t
	}
	show := func(d scaling.Decision) {
		fmt.Println(d.Desired, d.Reason)
	}
	// 09:00 nine jobs arrive; dispatch's wake raised the group to Need = 5.
	fmt.Println(scaling.Need(s, 9))

	// 09:01 the tick: five instances are still launching.
	d := scaling.Decide(scaling.Input{Now: at("09:01"), Settings: s, Ready: 9, Desired: 5, LastActiveAt: at("09:00")})
	show(d)

	// 09:05 all five registered and leased nine jobs.
	inst := func(id string) scaling.Instance { return scaling.Instance{ID: id, FirstSeen: at("09:01")} }
	worker := func(id string, leases int, idleSince string) scaling.Worker {
		return scaling.Worker{ID: "w-" + id, InstanceID: id, Leases: leases, LastSeen: at("09:40"), IdleSince: at(idleSince)}
	}
	instances := []scaling.Instance{inst("i-1"), inst("i-2"), inst("i-3"), inst("i-4"), inst("i-5")}

	// 09:40 two jobs still run on i-1 and i-2; i-3, i-4 and i-5 have been
	// idle since 09:36, 09:37 and 09:39.
	d = scaling.Decide(scaling.Input{Now: at("09:40"), Settings: s, Leased: 2, Desired: 5, Instances: instances,
		Workers: []scaling.Worker{worker("i-1", 1, "09:05"), worker("i-2", 1, "09:05"),
			worker("i-3", 0, "09:36"), worker("i-4", 0, "09:37"), worker("i-5", 0, "09:39")},
		LastActiveAt: at("09:39")})
	show(d)
	for _, v := range d.Victims {
		fmt.Println("  terminate", v.InstanceID, v.Why)
	}

	// 09:50 the last jobs ended at 09:48; 10:04 the idle window is over.
	two := instances[:2]
	idle := []scaling.Worker{worker("i-1", 0, "09:48"), worker("i-2", 0, "09:48")}
	idle[0].LastSeen, idle[1].LastSeen = at("10:04"), at("10:04")
	d = scaling.Decide(scaling.Input{Now: at("09:50"), Settings: s, Desired: 2, Instances: two, Workers: idle, LastActiveAt: at("09:48")})
	show(d)
	d = scaling.Decide(scaling.Input{Now: at("10:04"), Settings: s, Desired: 2, Instances: two, Workers: idle, LastActiveAt: at("09:48")})
	show(d)
	// Output:
	// 5
	// 5 hold 5: 9 ready + 0 leased need 5 × 2 slots; have 0 busy, 0 idle, 5 booting
	// 3 shrink 5→3: 0 ready + 2 leased need 1 × 2 slots; have 2 busy, 3 idle, 0 booting; terminate 2 idle past 2m0s; keep 1 idle within the 2m0s grace
	//   terminate i-3 idle
	//   terminate i-4 idle
	// 2 hold 2: no work for 2m0s of the 15m0s idle window; have 0 busy, 2 idle, 0 booting
	// 0 shrink 2→0: no work for 16m0s (idle window 15m0s); have 0 busy, 2 idle, 0 booting; terminate 2 idle past 2m0s
}
