package localaws

import (
	"encoding/xml"

	"net/url"
	"slices"
)

// ASGWarmPool is a fake group's warm pool: instances kept stopped beside the
// group. A group with one draws on it first when it launches (see fill),
// and SetDesiredCapacity below the group's instances scales in: the group
// picks instances not protected from scale-in, and with ReuseOnScaleIn they
// go back into the pool stopped instead of ending.
type ASGWarmPool struct {
	ReuseOnScaleIn bool
	// Stopped are the pool's instance ids, oldest first.
	Stopped []string
}

// WarmPool answers a group's warm pool (nil: none).
func (a *AutoScaling) WarmPool(group string) *ASGWarmPool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[group]
	if !ok || g.WarmPool == nil {
		return nil
	}
	wp := *g.WarmPool
	wp.Stopped = slices.Clone(wp.Stopped)
	return &wp
}

// setProtection serves SetInstanceProtection.
func (a *AutoScaling) setProtection(p url.Values) (any, *ASGError) {
	if e := required(p, "AutoScalingGroupName", "ProtectedFromScaleIn"); e != nil {
		return nil, e
	}
	name := p.Get("AutoScalingGroupName")
	g, ok := a.groups[name]
	if !ok {
		return nil, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	ids := memberList(p, "InstanceIds")
	if len(ids) == 0 {
		return nil, validation("1 validation error detected: Value null at 'instanceIds' failed to satisfy constraint: Member must not be null")
	}
	protect := p.Get("ProtectedFromScaleIn") == "true"
	for _, id := range ids {
		i := slices.IndexFunc(g.Instances, func(in ASGInstance) bool { return in.ID == id })
		if i < 0 {
			return nil, validation("The instance %s is not part of Auto Scaling group %s.", id, name)
		}
		g.Instances[i].ProtectedFromScaleIn = protect
	}
	return xmlSetProtectionResult{}, nil
}

// scaleIn removes instances down to the desired capacity, those not
// protected from scale-in only, as a group does when its desired capacity
// is lowered; with a reusing warm pool they go back into it. Groups without
// a warm pool keep the fake's older behaviour (the number changes only).
func (a *AutoScaling) scaleIn(g *ASGGroup) {
	if g.WarmPool == nil {
		return
	}
	for len(g.Instances) > g.Desired {
		i := slices.IndexFunc(g.Instances, func(in ASGInstance) bool { return !in.ProtectedFromScaleIn })
		if i < 0 {
			return // every instance protected: the group waits
		}
		id := g.Instances[i].ID
		g.Instances = slices.Delete(g.Instances, i, i+1)
		if g.WarmPool.ReuseOnScaleIn {
			g.WarmPool.Stopped = append(g.WarmPool.Stopped, id)
		}
	}
}

// fromWarmPool takes a stopped instance out of a group's warm pool for a
// launch; empty when there is none.
func fromWarmPool(g *ASGGroup) string {
	if g.WarmPool == nil || len(g.WarmPool.Stopped) == 0 {
		return ""
	}
	id := g.WarmPool.Stopped[0]
	g.WarmPool.Stopped = g.WarmPool.Stopped[1:]
	return id
}

type xmlSetProtectionResult struct {
	XMLName xml.Name `xml:"SetInstanceProtectionResult"`
}
