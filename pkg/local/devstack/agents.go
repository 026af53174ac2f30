package devstack

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/localfleet"
	"github.com/fleetq/fleetq/pkg/service/agent"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
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
	var warmup agent.Warmup
	if f, ok := s.Config.Fleet(fleet); ok {
		slots = f.SlotsPerInstance
		warmup = fleetWarmup(f.Agent.Warmup)
	}
	cfg := agent.Config{
		API: s.URL, Attest: s.instanceCredentials(fleet, instanceID), Fleet: fleet, Stage: s.Config.Stage,
		WorkerID: instanceID, InstanceID: instanceID, InstanceType: "local", AZ: "local-1a",
		MaxConcurrency: slots, Runner: agent.SleepRunner{}, Warmup: warmup, Clock: s.Env.Clock,
		PurchaseOption: localfleet.PurchaseOption(ctx), LaunchedAt: localfleet.LaunchedAt(ctx), FromPool: localfleet.FromPool(ctx),
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

// fleetWarmup is the fleet's warm-up as the agent runs it: what the CDK
// app's boot script hands `fleetq worker` as FLEETQ_WARMUP_* on EC2.
func fleetWarmup(w fleetconfig.Warmup) agent.Warmup {
	if !w.Enabled() {
		return agent.Warmup{}
	}
	return agent.Warmup{Workflow: w.Workflow, Input: w.InputJSON(), Exec: w.Exec, Timeout: w.Timeout.Std()}
}

// closeAgents stops launching and waits for the running agents (their
// context is canceled by then).
func (s *Stack) closeAgents() {
	s.agents.mu.Lock()
	s.agents.closed = true
	s.agents.mu.Unlock()
	s.agents.wg.Wait()
}

// The local fleet registers as a fleet in AWS does: each fleet has its own
// worker role, each booted instance gets credentials of that role whose
// session is the instance id (issued by the embedded STS, as EC2 hands out
// an instance profile's), and its agent attests with them.

// stsRegion is the region of the embedded STS's signatures.
const stsRegion = "us-east-1"

// WorkerRole is the name of a fleet's worker role on the dev stack.
func WorkerRole(stage, fleet string) string { return "fleetq-" + stage + "-" + fleet + "-worker" }

// registration starts the embedded STS and answers how the API checks
// registrations: attested against the local fleet's groups, and by the
// fleets' own secrets.
func (s *Stack) registration(o Options) (apifn.APIOption, error) {
	secrets := auth.StaticFleetSecrets{}
	for slug, secret := range s.FleetSecrets {
		secrets[slug] = []string{secret}
	}
	if s.Fleet == nil {
		// No local instances: nothing to attest.
		return apifn.Registration(nil, secrets), nil
	}
	sts, err := localaws.StartSTS("", o.Clock.Now)
	if err != nil {
		return nil, err
	}
	s.STS = sts
	roles, groups := map[string]string{}, map[string][]string{}
	for _, f := range o.Config.Fleets {
		roles[f.Slug] = localaws.RoleARN(WorkerRole(o.Config.Stage, f.Slug))
		groups[f.Slug] = []string{localfleet.GroupName(f.Slug, false), localfleet.GroupName(f.Slug, true)}
	}
	v, err := apifn.NewAttestor(s.Env, sts.URL, s.Fleet, roles, groups)
	if err != nil {
		return nil, err
	}
	return apifn.Registration(v, secrets), nil
}

// instanceCredentials are the credentials of a local instance's profile.
func (s *Stack) instanceCredentials(fleet, instanceID string) *agent.Attestation {
	creds := s.STS.Issue(localaws.STSCaller{Role: WorkerRole(s.Config.Stage, fleet), Session: instanceID})
	return &agent.Attestation{Credentials: credentials.StaticCredentialsProvider{Value: creds}, STSEndpoint: s.STS.URL, Region: stsRegion}
}
