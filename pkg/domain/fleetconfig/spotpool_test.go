package fleetconfig

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const poolFleet = `
stage: test
region: us-east-1
fleets:
  - slug: video
    workflows: [wf-a]
    instance_types: [g5.xlarge, g6.xlarge]
    max_instances: 12
`

const threePairs = `
      pairs:
        - {instance_type: g5.xlarge, zone: us-east-1a}
        - {instance_type: g5.xlarge, zone: us-east-1b}
        - {instance_type: g6.xlarge, zone: us-east-1a}
`

func TestSpotPoolInConfig(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte(poolFleet+"    spot_pool:\n      size: 10\n      volume_gb: 80\n      max_age_hours: 24\n      avoid_minutes: 5"+threePairs))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Fleets[0].SpotPool
	want := []SpotPoolPair{{"g5.xlarge", "us-east-1a"}, {"g5.xlarge", "us-east-1b"}, {"g6.xlarge", "us-east-1a"}}
	if !p.Enabled() || p.Size != 10 || p.VolumeGB != 80 || p.MaxAge() != 24*time.Hour || p.Avoid() != 5*time.Minute || len(p.Pairs) != 3 {
		t.Fatalf("spot_pool = %+v", p)
	}
	for i, w := range want {
		if p.Pairs[i] != w {
			t.Errorf("pairs[%d] = %+v, want %+v", i, p.Pairs[i], w)
		}
	}
	cfg, err = Parse("f.yaml", []byte(poolFleet+"    spot_pool:\n      size: 3"+threePairs))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Fleets[0].SpotPool; p.VolumeGB != DefaultSpotPoolVolumeGB || p.MaxAge() != DefaultSpotPoolMaxAgeHours*time.Hour || p.Avoid() != DefaultSpotPoolAvoidMinutes*time.Minute {
		t.Fatalf("defaults = %+v", p)
	}
	cfg, err = Parse("f.yaml", []byte(poolFleet))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Fleets[0].SpotPool.Enabled() {
		t.Fatal("a fleet without spot_pool has a pool")
	}
}

func TestSpotPoolRefusals(t *testing.T) {
	bad := []struct{ doc, want string }{
		{poolFleet + "    spot_pool:\n      size: 13" + threePairs, "f.yaml:10: fleets[0].spot_pool.size: must be between 0 (no pool) and max_instances (12), got 13"},
		{poolFleet + "    spot_pool:\n      size: -1\n", "fleets[0].spot_pool.size: must be between 0 (no pool) and max_instances"},
		{poolFleet + "    spot_pool:\n      size: 2\n      pairs:\n        - {instance_type: g5.xlarge, zone: us-east-1a}\n        - {instance_type: g6.xlarge, zone: us-east-1a}\n",
			"f.yaml:11: fleets[0].spot_pool.pairs: a pool needs at least 3 distinct instance type and zone pairs to spread over, got 2"},
		{poolFleet + "    spot_pool:\n      size: 2\n      pairs:\n        - {instance_type: g5.xlarge, zone: us-east-1a}\n        - {instance_type: g6.xlarge, zone: us-east-1a}\n        - {instance_type: g5.xlarge, zone: us-east-1a}\n",
			"f.yaml:14: fleets[0].spot_pool.pairs[2]: g5.xlarge in us-east-1a is listed twice"},
		{poolFleet + "    spot_pool:\n      size: 1\n      pairs:\n        - {zone: us-east-1a}\n", "fleets[0].spot_pool.pairs[0].instance_type: is required"},
		{poolFleet + "    spot_pool:\n      size: 1\n      pairs:\n        - {instance_type: g5.xlarge}\n", "fleets[0].spot_pool.pairs[0].zone: is required"},
		{poolFleet + "    spot_pool:\n      size: 1\n      pairs:\n        - {instance_type: g5.xlarge, zone: us-east-1}\n", `fleets[0].spot_pool.pairs[0].zone: "us-east-1" is not an Availability Zone name`},
		{poolFleet + "    spot_pool:\n      size: 1\n      pairs:\n        - {instance_type: p4d.24xlarge, zone: us-east-1a}\n", `fleets[0].spot_pool.pairs[0].instance_type: "p4d.24xlarge" must be one of the fleet's instance_types (g5.xlarge, g6.xlarge)`},
		{poolFleet + "    spot_pool:\n      size: 1\n      pairs:\n        - {instance_type: big, zone: us-east-1a}\n", `fleets[0].spot_pool.pairs[0].instance_type: "big" is not an EC2 instance type`},
		{poolFleet + "    spot_pool:\n      size: 3\n      volume_gb: 4" + threePairs, "fleets[0].spot_pool.volume_gb: must be between 8 and 16384, got 4"},
		{poolFleet + "    spot_pool:\n      size: 3\n      max_age_hours: 9000" + threePairs, "fleets[0].spot_pool.max_age_hours: must be between 1 and 8760, got 9000"},
		{poolFleet + "    spot_pool:\n      size: 3\n      avoid_minutes: -5" + threePairs, "fleets[0].spot_pool.avoid_minutes: must be between 1 and 1440, got -5"},
		{poolFleet + "    spot_pool:\n      size: 3\n      warm: true" + threePairs, "warm"},
		{poolFleet + "    spot_pool:\n      size: 1\n      pairs:\n        - {instance_type: g5.xlarge, zone: eu-west-1a}\n", `fleets[0].spot_pool.pairs[0].zone: "eu-west-1a" is not a zone of region us-east-1`},
		{strings.Replace(poolFleet, "region: us-east-1\n", "region: us-east-1\nnetwork:\n  availability_zones: [us-east-1a, us-east-1c]\n", 1) + "    spot_pool:\n      size: 3" + threePairs,
			`f.yaml:15: fleets[0].spot_pool.pairs[1].zone: "us-east-1b" is not one of network.availability_zones (us-east-1a, us-east-1c): the fleet has no subnet there`},
	}
	for _, b := range bad {
		_, err := Parse("f.yaml", []byte(b.doc))
		var verr *ValidationError
		if !errors.As(err, &verr) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v\ndoes not contain %s", err, b.want)
		}
	}
}

// EC2 hibernates no accelerated-computing instance type, so a GPU fleet's
// bridge cannot wait hibernated.
func TestBridgeHibernatedRefusedForGPUFleets(t *testing.T) {
	_, err := Parse("f.yaml", []byte(minimal+"    bridge:\n      pool: 2\n      state: hibernated\n"))
	want := "f.yaml:9: fleets[0].bridge.state: hibernated is not possible with instance_types[0] g5.xlarge: EC2 does not hibernate accelerated-computing (GPU) instance types; use stopped"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	cpu := strings.Replace(minimal, "[g5.xlarge]", "[m7i.xlarge, c7i.xlarge]", 1)
	if _, err := Parse("f.yaml", []byte(cpu+"    bridge:\n      pool: 2\n      state: hibernated\n")); err != nil {
		t.Fatalf("a CPU fleet's hibernated bridge: %v", err)
	}
	mixed := strings.Replace(minimal, "[g5.xlarge]", "[m7i.xlarge, g6e.xlarge]", 1)
	if _, err := Parse("f.yaml", []byte(mixed+"    bridge:\n      pool: 2\n      state: hibernated\n")); err == nil || !strings.Contains(err.Error(), "instance_types[1] g6e.xlarge") {
		t.Fatalf("a fleet with one GPU type: %v", err)
	}
}

func TestAccelerated(t *testing.T) {
	for _, it := range []string{"g4dn.xlarge", "g5.xlarge", "g5g.xlarge", "g6.2xlarge", "g6e.xlarge", "gr6.4xlarge", "p3.2xlarge", "p4d.24xlarge", "p5.48xlarge", "inf1.xlarge", "inf2.xlarge", "trn1.2xlarge", "dl1.24xlarge", "f1.2xlarge", "vt1.3xlarge"} {
		if !Accelerated(it) {
			t.Errorf("%s is accelerated computing", it)
		}
	}
	for _, it := range []string{"m7i.xlarge", "c7g.large", "r6i.large", "t3.micro", "i4i.large", "hpc7g.4xlarge", "m6gd.large", "x2idn.16xlarge"} {
		if Accelerated(it) {
			t.Errorf("%s is not accelerated computing", it)
		}
	}
}
