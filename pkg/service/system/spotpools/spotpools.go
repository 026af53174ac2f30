// Package spotpools builds the EC2 side of the fleets' stopped Spot pools
// (pkg/aws/ec2pool) beside their groups: the one constructor the scaler
// function (which runs the pools) and the dispatch function (whose wake
// starts their instances on enqueue) both build their capacity with. It
// is a package of its own so that dispatch links it without the scaler
// function's other dependencies.
package spotpools

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/ec2pool"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
)

// EC2 returns the function's EC2 client (FLEETQ_EC2_ENDPOINT overrides
// the endpoint).
func EC2(e *system.Lambda) *ec2.Client {
	return ec2.NewFromConfig(e.AWS, func(o *ec2.Options) { e.Endpoint(awsenv.EnvEC2Endpoint, &o.BaseEndpoint) })
}

// Capacity is what a function raises and starts: the fleets' groups, and,
// when a fleet of cfg keeps a stopped Spot pool, the groups with the
// fleets' pools through client (PoolGroups).
func Capacity(groups scaler.Groups, client ec2pool.API, cfg *fleetconfig.Config) scaler.Capacity {
	if !enabled(cfg) {
		return groups
	}
	return NewPoolGroups(groups, client, cfg)
}

// enabled reports whether a fleet of cfg keeps a stopped Spot pool.
func enabled(cfg *fleetconfig.Config) bool {
	for _, f := range cfg.Fleets {
		if f.SpotPool.Enabled() {
			return true
		}
	}
	return false
}

// PoolGroups are the fleets' groups (scaler.Groups) with the EC2 side of
// their stopped Spot pools: each fleet's pool runs through its ec2pool
// adapter (Pools, by slug), and EC2's refusals reach the scaler as its
// own: no Spot capacity (scaler.ErrNoSpotCapacity), an instance EC2 holds
// stopped after an interruption (scaler.ErrPoolInterrupted). The scaler
// function runs the pools through it; the dispatch function only starts
// their instances (its role may start the stage's pool instances and
// nothing else of EC2's but DescribeInstances).
type PoolGroups struct {
	scaler.Groups
	Pools map[string]ec2pool.Pool
}

var _ scaler.SpotPool = PoolGroups{}

// NewPoolGroups is groups with an ec2pool adapter over client for each
// fleet of cfg that keeps a Spot pool: its instances tagged with the stage
// and the fleet, placed in the groups' subnet of each pair's zone, launched
// from the launch template of the fleet's Spot group (read from the group
// at the first launch).
func NewPoolGroups(groups scaler.Groups, client ec2pool.API, cfg *fleetconfig.Config) PoolGroups {
	subnets := map[string]string{}
	for _, sn := range groups.Subnets {
		if _, ok := subnets[sn.Zone]; !ok {
			subnets[sn.Zone] = sn.ID
		}
	}
	g := PoolGroups{Groups: groups, Pools: map[string]ec2pool.Pool{}}
	for _, f := range cfg.Fleets {
		if f.SpotPool.Enabled() {
			g.Pools[f.Slug] = ec2pool.Pool{EC2: client, Stage: cfg.Stage, Fleet: f.Slug, Subnets: subnets}
		}
	}
	return g
}

// HasSpotPool reports whether the fleet has a pool adapter.
func (g PoolGroups) HasSpotPool(fleet string) bool {
	_, ok := g.Pools[fleet]
	return ok
}

func (g PoolGroups) spotPool(fleet string) (ec2pool.Pool, error) {
	p, ok := g.Pools[fleet]
	if !ok {
		return ec2pool.Pool{}, fmt.Errorf("fleet %s has no Spot pool adapter", fleet)
	}
	return p, nil
}

// poolError wraps an adapter's refusal in the scaler's error of the same
// meaning.
func poolError(err error) error {
	switch {
	case errors.Is(err, ec2pool.ErrNoCapacity):
		return fmt.Errorf("%w: %w", scaler.ErrNoSpotCapacity, err)
	case errors.Is(err, ec2pool.ErrInterrupted):
		return fmt.Errorf("%w: %w", scaler.ErrPoolInterrupted, err)
	}
	return err
}

// CreatePoolInstance launches a pool instance of the fleet on pair, from
// its Spot group's launch template.
func (g PoolGroups) CreatePoolInstance(ctx context.Context, fleet string, pair scaling.Pair, volumeGB int) (string, error) {
	p, err := g.spotPool(fleet)
	if err != nil {
		return "", err
	}
	if p.LaunchTemplateID == "" {
		if g.Groups.Adapter == nil {
			return "", fmt.Errorf("fleet %s: no launch template for its Spot pool", fleet)
		}
		grp, err := g.Groups.Adapter.Describe(ctx, g.Groups.Names[fleet])
		if err != nil {
			return "", fmt.Errorf("the launch template of fleet %s: %w", fleet, err)
		}
		if grp.LaunchTemplateID == "" {
			return "", fmt.Errorf("fleet %s: its group %s has no launch template", fleet, grp.Name)
		}
		p.LaunchTemplateID = grp.LaunchTemplateID
		g.Pools[fleet] = p
	}
	in, err := p.Create(ctx, pair, volumeGB, "")
	return in.ID, poolError(err)
}

// StartPoolInstance starts a stopped pool instance.
func (g PoolGroups) StartPoolInstance(ctx context.Context, fleet, id string) error {
	p, err := g.spotPool(fleet)
	if err != nil {
		return err
	}
	return poolError(p.Start(ctx, id))
}

// StopPoolInstance stops a pool instance back into the pool.
func (g PoolGroups) StopPoolInstance(ctx context.Context, fleet, id string) error {
	p, err := g.spotPool(fleet)
	if err != nil {
		return err
	}
	return poolError(p.Stop(ctx, id))
}

// TerminatePoolInstance cancels a pool instance's Spot request and
// terminates it.
func (g PoolGroups) TerminatePoolInstance(ctx context.Context, fleet, id string) error {
	p, err := g.spotPool(fleet)
	if err != nil {
		return err
	}
	return p.End(ctx, id)
}

// DescribePool lists the fleet's pool instances as EC2 reports them.
func (g PoolGroups) DescribePool(ctx context.Context, fleet string) ([]scaler.PoolMachine, error) {
	p, err := g.spotPool(fleet)
	if err != nil {
		return nil, err
	}
	ins, err := p.Describe(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]scaler.PoolMachine, 0, len(ins))
	for _, in := range ins {
		out = append(out, scaler.PoolMachine{ID: in.ID, Pair: in.Pair, State: in.State, Interrupted: in.Interrupted()})
	}
	return out, nil
}
