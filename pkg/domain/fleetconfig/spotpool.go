package fleetconfig

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// SpotPool is a fleet's pool of stopped Spot instances (docs/scaling.md,
// "Cold start: the Spot pool"): instances fleetq launches outside the fleet's
// group as persistent Spot requests that stop on interruption, prepares
// and stops, and starts when work arrives that the running workers cannot
// take. Stopped, an instance bills only its volume; each start bills at
// least a minute.
type SpotPool struct {
	// Size is how many stopped Spot instances the pool keeps; 0 (the
	// default) means no pool. At most max_instances.
	Size int `yaml:"size"`
	// Pairs are the instance type and Availability Zone pairs the pool
	// spreads its instances over: at least 3 distinct pairs when size is
	// set, each type one of the fleet's instance_types and each zone one of
	// network.availability_zones when they are listed. A stopped instance
	// cannot change its type or zone, so the pairs are the pool's only
	// way around a pair without Spot capacity.
	Pairs []SpotPoolPair `yaml:"pairs"`
	// VolumeGB is the size of a pool instance's root volume, billed while
	// the instance is stopped (8 to 16384; default 60).
	VolumeGB int `yaml:"volume_gb"`
	// MaxAgeHours is how old a stopped instance may get before it is
	// replaced by a new one (1 to 8760; default 168).
	MaxAgeHours int `yaml:"max_age_hours"`
	// AvoidMinutes is how long a pair whose start failed for want of Spot
	// capacity is not started again (1 to 1440; default 15).
	AvoidMinutes int `yaml:"avoid_minutes"`
}

// SpotPoolPair is one instance type in one Availability Zone.
type SpotPoolPair struct {
	// InstanceType is the EC2 instance type (g5.xlarge).
	InstanceType string `yaml:"instance_type"`
	// Zone is the pair's zone, by name (us-east-1a).
	Zone string `yaml:"zone"`
}

// Defaults of the Spot pool.
const (
	DefaultSpotPoolVolumeGB     = 60
	DefaultSpotPoolMaxAgeHours  = 168
	DefaultSpotPoolAvoidMinutes = 15
	// MinSpotPoolPairs is the fewest distinct pairs a pool spreads over.
	MinSpotPoolPairs = 3
)

// Enabled reports whether the fleet keeps a Spot pool.
func (p SpotPool) Enabled() bool { return p.Size > 0 }

// MaxAge is MaxAgeHours as a duration.
func (p SpotPool) MaxAge() time.Duration { return time.Duration(p.MaxAgeHours) * time.Hour }

// Avoid is AvoidMinutes as a duration.
func (p SpotPool) Avoid() time.Duration { return time.Duration(p.AvoidMinutes) * time.Minute }

func (p *SpotPool) applyDefaults() {
	if p.VolumeGB == 0 {
		p.VolumeGB = DefaultSpotPoolVolumeGB
	}
	if p.MaxAgeHours == 0 {
		p.MaxAgeHours = DefaultSpotPoolMaxAgeHours
	}
	if p.AvoidMinutes == 0 {
		p.AvoidMinutes = DefaultSpotPoolAvoidMinutes
	}
}

// zonePattern is an Availability Zone's name: its region's and a letter.
var zonePattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d[a-z]$`)

func (f *Fleet) validateSpotPool(at string, k *checker) {
	p := f.SpotPool
	at += ".spot_pool"
	if p.Size < 0 || p.Size > f.MaxInstances {
		k.add(at+".size", "must be between 0 (no pool) and max_instances (%d), got %d", f.MaxInstances, p.Size)
	}
	seen := map[SpotPoolPair]bool{}
	for j, pair := range p.Pairs {
		field := fmt.Sprintf("%s.pairs[%d]", at, j)
		switch {
		case pair.InstanceType == "":
			k.add(field+".instance_type", "is required")
		case !instancePattern.MatchString(pair.InstanceType):
			k.add(field+".instance_type", "%q is not an EC2 instance type (e.g. g5.xlarge)", pair.InstanceType)
		case !slices.Contains(f.InstanceTypes, pair.InstanceType):
			k.add(field+".instance_type", "%q must be one of the fleet's instance_types (%s): pool instances launch from the fleet's launch template", pair.InstanceType, strings.Join(f.InstanceTypes, ", "))
		}
		switch {
		case pair.Zone == "":
			k.add(field+".zone", "is required")
		case !zonePattern.MatchString(pair.Zone):
			k.add(field+".zone", "%q is not an Availability Zone name (e.g. us-east-1a)", pair.Zone)
		}
		if seen[pair] {
			k.add(field, "%s in %s is listed twice", pair.InstanceType, pair.Zone)
		}
		seen[pair] = true
	}
	if p.Size > 0 && len(seen) < MinSpotPoolPairs {
		k.add(at+".pairs", "a pool needs at least %d distinct instance type and zone pairs to spread over, got %d", MinSpotPoolPairs, len(seen))
	}
	k.rangeInt(at+".volume_gb", p.VolumeGB, 8, 16384)
	k.rangeInt(at+".max_age_hours", p.MaxAgeHours, 1, 8760)
	k.rangeInt(at+".avoid_minutes", p.AvoidMinutes, 1, 1440)
}

// acceleratedFamily matches the accelerated-computing instance families
// (GPU, Inferentia, Trainium, Gaudi, FPGA, video transcoding: g5, gr6,
// p4d, inf2, trn1, dl1, f1, vt1, ...).
var acceleratedFamily = regexp.MustCompile(`^(g|gr|p|inf|trn|dl|f|vt)\d`)

// Accelerated reports whether an instance type is of an
// accelerated-computing family, which EC2 cannot hibernate.
func Accelerated(instanceType string) bool {
	family, _, _ := strings.Cut(instanceType, ".")
	return acceleratedFamily.MatchString(family)
}

// validateSpotPoolZones checks the pool's zones against the stage's: a
// pool instance runs in the fleet's subnet of its zone, so the zone must
// be one of network.availability_zones when they are listed, and of the
// stage's region.
func (c *Config) validateSpotPoolZones(at string, f *Fleet, k *checker) {
	for j, pair := range f.SpotPool.Pairs {
		if !zonePattern.MatchString(pair.Zone) {
			continue // said by validateSpotPool
		}
		field := fmt.Sprintf("%s.spot_pool.pairs[%d].zone", at, j)
		switch zones := c.Network.AvailabilityZones; {
		case c.Region != "" && !strings.HasPrefix(pair.Zone, c.Region):
			k.add(field, "%q is not a zone of region %s", pair.Zone, c.Region)
		case len(zones) > 0 && !slices.Contains(zones, pair.Zone):
			k.add(field, "%q is not one of network.availability_zones (%s): the fleet has no subnet there", pair.Zone, strings.Join(zones, ", "))
		}
	}
}
