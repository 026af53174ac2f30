package devstack

import (
	"context"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/local/localfleet"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// agents tracks the in-process workers of the local fleet.
type agents struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	// configure is FleetOptions.AgentConfig.
	configure func(fleet, instanceID string, c *agent.Config)
}

// agentMachine is a local instance running the real worker agent.
type agentMachine struct {
	a      *agent.Agent
	cancel context.CancelFunc
}

func (m *agentMachine) Stop()        { m.cancel() }
func (m *agentMachine) Running() int { return m.a.Running() }

// SpotNotice is what the instance metadata tells the agent on EC2.
func (m *agentMachine) SpotNotice() { m.a.SpotNotice() }

// launchAgent starts the worker agent, with the sleep runner, on a booted
// local instance: the same code `fleetq worker` runs on an EC2 instance,
// talking to the stack over HTTP.
func (s *Stack) launchAgent(ctx context.Context, fleet, instanceID string) localfleet.Machine {
	slots := 1
	if f, ok := s.Config.Fleet(fleet); ok {
		slots = f.SlotsPerInstance
	}
	cfg := agent.Config{
		API: s.URL, FleetSecret: s.FleetSecret, Fleet: fleet, Stage: s.Config.Stage,
		WorkerID: instanceID, InstanceID: instanceID, InstanceType: "local", AZ: "local-1a",
		MaxConcurrency: slots, Runner: agent.SleepRunner{}, Clock: s.Env.Clock,
		PurchaseOption: localfleet.PurchaseOption(ctx), LaunchedAt: localfleet.LaunchedAt(ctx),
		Logger:      s.log.With("instance_id", instanceID),
		BackoffBase: 500 * time.Millisecond, BackoffMax: 10 * time.Second,
	}
	if s.agents.configure != nil {
		s.agents.configure(fleet, instanceID, &cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		s.log.Error("local worker", "instance_id", instanceID, "error", err.Error())
		return nil
	}
	s.agents.mu.Lock()
	defer s.agents.mu.Unlock()
	if s.agents.closed {
		return nil
	}
	actx, cancel := context.WithCancel(ctx)
	s.agents.wg.Add(1)
	go func() {
		defer s.agents.wg.Done()
		if err := a.Run(actx); err != nil {
			s.log.Error("local worker stopped", "instance_id", instanceID, "error", err.Error())
		}
	}()
	return &agentMachine{a: a, cancel: cancel}
}

// closeAgents stops launching and waits for the running agents (their
// context is canceled by then).
func (s *Stack) closeAgents() {
	s.agents.mu.Lock()
	s.agents.closed = true
	s.agents.mu.Unlock()
	s.agents.wg.Wait()
}
