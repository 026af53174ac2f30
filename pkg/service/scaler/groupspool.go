package scaler

import (
	"context"
	"errors"
	"fmt"

	"github.com/fleetq/fleetq/pkg/aws/ec2pool"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// The fleets' stopped Spot pools in AWS: Groups runs a fleet's pool
// through its ec2pool adapter (Groups.Pools), and tells EC2's refusals
// apart for the scaler: no Spot capacity (ErrNoSpotCapacity), an instance
// EC2 holds stopped after an interruption (ErrPoolInterrupted).

var _ SpotPool = Groups{}

// HasSpotPool reports whether the fleet has a pool adapter.
func (g Groups) HasSpotPool(fleet string) bool {
	_, ok := g.Pools[fleet]
	return ok
}

func (g Groups) spotPool(fleet string) (ec2pool.Pool, error) {
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
		return fmt.Errorf("%w: %w", ErrNoSpotCapacity, err)
	case errors.Is(err, ec2pool.ErrInterrupted):
		return fmt.Errorf("%w: %w", ErrPoolInterrupted, err)
	}
	return err
}

// CreatePoolInstance launches a pool instance of the fleet on pair.
func (g Groups) CreatePoolInstance(ctx context.Context, fleet string, pair scaling.Pair, volumeGB int) (string, error) {
	p, err := g.spotPool(fleet)
	if err != nil {
		return "", err
	}
	in, err := p.Create(ctx, pair, volumeGB, "")
	return in.ID, poolError(err)
}

// StartPoolInstance starts a stopped pool instance.
func (g Groups) StartPoolInstance(ctx context.Context, fleet, id string) error {
	p, err := g.spotPool(fleet)
	if err != nil {
		return err
	}
	return poolError(p.Start(ctx, id))
}

// StopPoolInstance stops a pool instance back into the pool.
func (g Groups) StopPoolInstance(ctx context.Context, fleet, id string) error {
	p, err := g.spotPool(fleet)
	if err != nil {
		return err
	}
	return poolError(p.Stop(ctx, id))
}

// TerminatePoolInstance cancels a pool instance's Spot request and
// terminates it.
func (g Groups) TerminatePoolInstance(ctx context.Context, fleet, id string) error {
	p, err := g.spotPool(fleet)
	if err != nil {
		return err
	}
	return p.End(ctx, id)
}

// DescribePool lists the fleet's pool instances as EC2 reports them.
func (g Groups) DescribePool(ctx context.Context, fleet string) ([]PoolMachine, error) {
	p, err := g.spotPool(fleet)
	if err != nil {
		return nil, err
	}
	ins, err := p.Describe(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PoolMachine, 0, len(ins))
	for _, in := range ins {
		out = append(out, PoolMachine{ID: in.ID, Pair: in.Pair, State: in.State, Interrupted: in.Interrupted()})
	}
	return out, nil
}
