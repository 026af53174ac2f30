package localfleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

type fakeMachine struct {
	mu      sync.Mutex
	stopped bool
	running int
}

func (m *fakeMachine) Stop()        { m.mu.Lock(); m.stopped = true; m.mu.Unlock() }
func (m *fakeMachine) Running() int { m.mu.Lock(); defer m.mu.Unlock(); return m.running }

func TestBootTerminateAndSpot(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	machines := map[string]*fakeMachine{}
	var warned []string
	f := New(ctx, Options{
		Clock: clk, BootDelay: 30 * time.Second, MaxInstances: map[string]int{"gpu": 3},
		Launch: func(_ context.Context, fleet, id string) Machine {
			m := &fakeMachine{}
			machines[id] = m
			return m
		},
		Interrupt: func(_ context.Context, fleet, id string) error { warned = append(warned, id); return nil },
		Notice:    2 * time.Minute,
	})
	if err := f.SetDesired(ctx, "gpu", 4); err == nil {
		t.Fatal("desired above the group's max accepted")
	}
	if err := f.SetDesired(ctx, "gpu", 2); err != nil {
		t.Fatal(err)
	}
	g, _ := f.Describe(ctx, "gpu")
	if len(g.Instances) != 2 || g.InService() != 0 || len(machines) != 0 {
		t.Fatalf("just launched: %+v, %d machines", g, len(machines))
	}
	clk.Advance(30 * time.Second)
	f.Step(ctx, 30*time.Second)
	g, _ = f.Describe(ctx, "gpu")
	if g.InService() != 2 || len(machines) != 2 {
		t.Fatalf("after boot: %+v, %d machines", g, len(machines))
	}
	// Terminating a busy instance is counted, and lowers desired.
	busy := g.Instances[0].ID
	machines[busy].running = 1
	if err := f.Terminate(ctx, "gpu", busy); err != nil {
		t.Fatal(err)
	}
	if !machines[busy].stopped {
		t.Fatal("terminated instance's worker still running")
	}
	g, _ = f.Describe(ctx, "gpu")
	if g.Desired != 1 || len(g.Instances) != 1 || f.Stats().KilledBusy != 1 {
		t.Fatalf("after terminate: %+v, stats %+v", g, f.Stats())
	}
	if err := f.Terminate(ctx, "gpu", busy); err != nil {
		t.Fatalf("terminating a gone instance: %v", err)
	}
	// Spot: a certain interruption warns, then reclaims and replaces the instance.
	f.o.SpotRate = 1e9
	f.Step(ctx, time.Second)
	f.o.SpotRate = 0
	victim := g.Instances[0].ID
	if len(warned) != 1 || warned[0] != victim {
		t.Fatalf("warned %v, want %s", warned, victim)
	}
	clk.Advance(2 * time.Minute)
	f.Step(ctx, 2*time.Minute)
	g, _ = f.Describe(ctx, "gpu")
	if !machines[victim].stopped || g.Desired != 1 || len(g.Instances) != 1 || g.Instances[0].ID == victim || !g.Instances[0].Booting() {
		t.Fatalf("after reclaim: %+v", g)
	}
	if s := f.Stats(); s.Interrupted != 1 || s.Launched != 3 || s.Peak["gpu"] != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// Run steps the fleet on its clock: a boot finishes at the first step after
// the boot delay, and not before.
func TestRunStepsOnTheClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	launched := make(chan string, 1)
	f := New(ctx, Options{
		Clock: clk, BootDelay: 3 * time.Second, MaxInstances: map[string]int{"gpu": 1},
		Launch: func(_ context.Context, _, id string) Machine { launched <- id; return &fakeMachine{} },
	})
	if err := f.SetDesired(ctx, "gpu", 1); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); f.Run(ctx, time.Second) }()
	wait, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	for step := 1; step <= 2; step++ {
		if err := clk.BlockUntil(wait, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	// Two seconds in, whenever the steps ran, the instance is still booting.
	select {
	case id := <-launched:
		t.Fatalf("%s launched its worker before the boot delay", id)
	default:
	}
	clk.Advance(time.Second)
	select {
	case <-launched:
	case <-wait.Done():
		t.Fatal("no step launched the worker once the boot delay was over")
	}
	cancel()
	select {
	case <-stopped:
	case <-wait.Done():
		t.Fatal("Run did not return when ctx ended")
	}
}
