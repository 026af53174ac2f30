package scaling

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// t0 is 12:00 UTC on a Monday.
func warm(windows ...string) []fleetconfig.WarmWindow {
	var out []fleetconfig.WarmWindow
	for _, s := range windows {
		w, err := fleetconfig.ParseWarmWindow(s)
		if err != nil {
			panic(err)
		}
		out = append(out, w)
	}
	return out
}

func TestDecideWarm(t *testing.T) {
	with := func(in Input, windows ...string) Input {
		in.Settings.Warm = warm(windows...)
		return in
	}
	cases := []decideCase{
		{name: "min floor raises an empty fleet in the window", in: with((&fleet{}).input(0, 0), "08:00-20:00,min=2"),
			desired: 2, launch: 2, reason: "grow 0→2: no work for 1m0s of the 15m0s idle window; warm 08:00-20:00: at least 2"},
		{name: "outside the window nothing changes", in: with((&fleet{}).input(0, 0), "13:00-20:00,min=2"), desired: 0},
		{name: "on another day nothing changes", in: with((&fleet{}).input(0, 0), "08:00-20:00,min=2,days=sat+sun"), desired: 0},
		{name: "spare rides on top of the work", in: with((&fleet{}).worker(2, 0).worker(2, 0).input(1, 4), "08:00-20:00,spare=2"),
			desired: 5, launch: 3, reason: "1 ready + 4 leased need 3 × 2 slots; warm 08:00-20:00: 2 spare"},
		{name: "spare with no work at all", in: with((&fleet{}).input(0, 0), "08:00-20:00,spare=1"), desired: 1, launch: 1},
		{name: "the larger of overlapping windows", in: with((&fleet{}).input(0, 0), "08:00-20:00,min=1", "11:00-13:00,min=3"), desired: 3, launch: 3},
		{name: "the floor stays within max", in: func() Input {
			i := with((&fleet{}).input(30, 0), "08:00-20:00,spare=4")
			return i
		}(), desired: 10, launch: 10},
		{name: "work above the floor is not raised further", in: with((&fleet{}).input(10, 0), "08:00-20:00,min=2"), desired: 5, launch: 5},
		{name: "warm idle workers are not shrunk in the window", in: func() Input {
			i := with((&fleet{}).worker(0, time.Hour).worker(0, time.Hour).input(0, 0), "08:00-20:00,min=2")
			i.LastActiveAt = t0.Add(-time.Hour)
			return i
		}(), desired: 2},
		{name: "after the window the idle window and grace take them", in: func() Input {
			i := with((&fleet{}).worker(0, time.Hour).worker(0, time.Minute).input(0, 0), "08:00-11:00,min=2")
			i.LastActiveAt = t0.Add(-time.Hour)
			return i
		}(), desired: 1, victims: "i-0:idle", reason: "keep 1 idle within the 2m0s grace"},
	}
	runDecideCases(t, cases)
}

func TestSettingsOfCarriesWarm(t *testing.T) {
	f := &fleetconfig.Fleet{SlotsPerInstance: 1, MaxInstances: 4, Warm: warm("08:00-20:00,min=2")}
	if s := SettingsOf(f); len(s.Warm) != 1 || s.Warm[0].MinInstances != 2 {
		t.Fatalf("warm = %+v", s.Warm)
	}
}
