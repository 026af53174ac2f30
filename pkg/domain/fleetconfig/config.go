package fleetconfig

import (
	"fmt"
	"time"
)

// Config is the whole configuration of one stage.
type Config struct {
	// Stage names the deployment (dev, prod, ...). Workers must register with it.
	Stage string `yaml:"stage"`
	// Region is the AWS region the stage is deployed to (used by the CDK app).
	Region string `yaml:"region"`
	// JobRetention is how long a finished job is kept before its record expires by TTL.
	JobRetention Duration `yaml:"job_retention"`
	// RegistrationLimit is the number of worker registrations allowed per source
	// address per minute.
	RegistrationLimit int `yaml:"registration_limit"`
	// WaitConcurrency is the reserved concurrency of the function that
	// serves producers' waits (GET /api/jobs/{job_id}/wait), its cap: that
	// many waits at once, each held up to 25 s; past it a wait is refused
	// and the clients look at the job with GET instead (CDK app only).
	// Reserved, it is taken from the account's Lambda concurrency, which
	// must keep 100 unreserved.
	WaitConcurrency int `yaml:"wait_concurrency"`
	// Network says where the fleets' instances run (CDK app only).
	Network Network `yaml:"network"`
	// AgentURL overrides where instances download the fleetq binary from at
	// boot (CDK app only). Empty (the default) ships the agent `make build`
	// cross-compiled with the stack, as an S3 asset verified by its SHA-256.
	AgentURL string `yaml:"agent_url"`
	// AgentSHA256 is the hex SHA-256 the binary at AgentURL must have; when
	// set, an instance whose download does not match marks itself unhealthy.
	AgentSHA256 string `yaml:"agent_sha256"`
	// Alarms says who is told when an alarm of the stage fires (CDK app only).
	Alarms Alarms `yaml:"alarms"`
	// Webhooks says where job outcomes may be POSTed (none by default).
	Webhooks Webhooks `yaml:"webhooks"`
	// Tags are cost-allocation tags (key: value) on every resource of the
	// stage's stack, its instances and their volumes included (CDK app only).
	Tags map[string]string `yaml:"tags"`
	// Fleets are the GPU fleets of the stage, one Auto Scaling Group each.
	Fleets []Fleet `yaml:"fleets"`
	// Tenants are per-tenant quotas and fair-share weights, stage-wide (docs/scaling.md, "Tenant quotas"),
	// and the IAM principals that act for each tenant (docs/security.md). Optional: a tenant needs no
	// entry to submit (with an API key, or an IAM principal mapped by fleetq tenants principals add).
	// A tenant not listed takes the "*" entry, and without one the default policy: no max_queued
	// and no max_leased cap, weight 1, and its jobs' own priority (0 unless the submission sets one).
	Tenants []Tenant `yaml:"tenants"`
	// Operators are the IAM role or user ARNs that act as operators on the
	// producer routes (any tenant's jobs). Optional: the operator routes
	// (/api/admin/*) take whoever holds the stack's operator policy
	// (OperatorPolicyArn), listed or not, and fleetq tenants principals add
	// --operator maps more principals without a deploy. An IAM caller of a
	// producer route must be one of these, one tenant's principal, or mapped
	// in the table; others get 403.
	Operators []string `yaml:"operators"`
	// Prices price each job (docs/scaling.md, "Cost per job"); none by default.
	Prices Prices `yaml:"prices"`

	// source names the file (or built-in) the config was read from, for messages.
	source string
}

// Network places the fleets' instances. Either VPCCIDR (the stack creates a
// VPC) or VPCID with SubnetIDs (an existing VPC) is set.
type Network struct {
	// VPCCIDR is the address range of the VPC the stack creates for the
	// fleets (10.80.0.0/16 when neither it nor VPCID is set).
	VPCCIDR string `yaml:"vpc_cidr"`
	// MaxAZs is how many of the region's zones (from Fn::GetAZs) a new VPC
	// spans when AvailabilityZones is not given: 1 or 2 (the default).
	MaxAZs int `yaml:"max_azs"`
	// VPCID is an existing VPC to run the fleets' instances in, instead of
	// a new one.
	VPCID string `yaml:"vpc_id"`
	// SubnetIDs are the subnets of VPCID to use (public or with a NAT:
	// workers call out to the API, S3 and Secrets Manager).
	SubnetIDs []string `yaml:"subnet_ids"`
	// AvailabilityZones pins the AZs of an existing VPC's subnets, in the same
	// order as SubnetIDs, so synthesis needs no account lookup. With
	// VPCCIDR it names the zones of the new VPC's subnets; left out, the
	// stack takes the region's first two zones from Fn::GetAZs at deploy.
	AvailabilityZones []string `yaml:"availability_zones"`
}

// Alarms are the stage's alarm subscriptions: every alarm of the stack
// notifies one SNS topic, and each address here subscribes to it.
type Alarms struct {
	// Emails each get an SNS subscription (confirmed from the mail AWS sends).
	Emails []string `yaml:"emails"`
}

// Fleet is one pool of identical GPU instances serving a set of workflows.
type Fleet struct {
	// Slug names the fleet in the API, the workers' registrations and the
	// AWS resource names (fleetq-<stage>-<slug>): lowercase letters, digits
	// and dashes.
	Slug string `yaml:"slug"`
	// Description is for people reading the fleet list.
	Description string `yaml:"description"`
	// Workflows are the workflows the fleet serves; each belongs to one fleet.
	// A fleet without workflows accepts no workers (422 no_workflows).
	Workflows []string `yaml:"workflows"`

	// SlotsPerInstance is how many jobs one instance runs at once; it is the
	// max_concurrency the agent on the instance registers with.
	SlotsPerInstance int `yaml:"slots_per_instance"`
	// MinInstances is the fewest instances the scaler keeps, even idle.
	MinInstances int `yaml:"min_instances"`
	// MaxInstances is the most instances the fleet's group may run; the
	// GPU vCPU quota must allow it (fleetq doctor checks).
	MaxInstances int `yaml:"max_instances"`
	// IdleWindow is how long the fleet must have no queued or leased job before
	// it scales to its minimum.
	IdleWindow Duration `yaml:"idle_window"`
	// ScaleInGrace is how long a worker must have been idle before it may be
	// chosen as a scale-in victim.
	ScaleInGrace Duration `yaml:"scale_in_grace"`
	// BootTimeout is how long an instance may take from launch to registration
	// before it is terminated as unhealthy.
	BootTimeout Duration `yaml:"boot_timeout"`

	// WorkerCap is the most workers the fleet accepts registered at once;
	// registrations past it are refused (fleet_full).
	WorkerCap int `yaml:"worker_cap"`
	// RequireApproval registers new workers unapproved: they may poll but
	// get no job until an operator approves them.
	RequireApproval bool `yaml:"require_approval"`
	// AcceptSecret lets workers register with the fleet's own secret
	// instead of an attested AWS identity: for workers outside AWS and
	// workers started by hand on the dev stack. The stack then keeps one
	// secret for this fleet alone; its instances in AWS never read it.
	AcceptSecret bool `yaml:"accept_secret"`

	// LeaseSeconds is how long a lease lasts without a heartbeat before the
	// job is given to another worker.
	LeaseSeconds int `yaml:"lease_seconds"`
	// HeartbeatSeconds is how often a worker heartbeats each running job.
	HeartbeatSeconds int `yaml:"heartbeat_seconds"`
	// PollSeconds is how long an idle worker waits between two polls.
	PollSeconds int `yaml:"poll_seconds"`
	// ReadyShards is how many partitions of the index each of the fleet's
	// busy partitions is spread over (1 to 16): its ready queue, its leased
	// and succeeded jobs, and its workers. Each partition key takes at most
	// 1,000 writes a second, and every lease puts a job in and out of the
	// ready queue and the leased jobs and changes its worker's entry twice,
	// so a fleet that leases more than about 400 jobs a second needs more
	// than one: 4 carry 1,000 leases and completions a second at about half
	// the limit. Each poll reads the head of every ready shard (one query
	// each), and the scaler every shard. It may be raised at any time (after
	// the deploy that brings it); lowered only while the fleet has no job
	// queued or running and no worker registered.
	ReadyShards int `yaml:"ready_shards"`

	// JobTimeout is the default time a job may run per attempt.
	JobTimeout Duration `yaml:"job_timeout"`
	// QueueTimeout is the default time a job may wait before its first lease;
	// zero means it may wait forever.
	QueueTimeout Duration `yaml:"queue_timeout"`
	// QueueSLO is how long the fleet's oldest ready job may wait for a lease
	// before the fleet's alarm fires (CDK app only).
	QueueSLO Duration `yaml:"queue_slo"`

	// Retry is how often a failing job is tried and the waits between.
	Retry RetryPolicy `yaml:"retry"`
	// PreemptionCap is how many Spot interruptions a job may take before it
	// is dead (reason preemption_cap), or, with an On-Demand rung
	// (on_demand), is leased by On-Demand workers only (reason
	// preemption_cap_on_demand); preemptions spend no attempt.
	PreemptionCap int `yaml:"preemption_cap"`

	// Warm are the hours the fleet keeps capacity ready ahead of demand
	// (docs/scaling.md, "Warm capacity"); none by default.
	Warm []WarmWindow `yaml:"warm"`
	// Forecast keeps capacity ready ahead of the demand the fleet's own
	// history expects (docs/scaling.md, "Forecast"); off by default.
	Forecast Forecast `yaml:"forecast"`
	// OnDemand is the fleet's On-Demand rung beside its Spot group; off by
	// default.
	OnDemand OnDemand `yaml:"on_demand"`
	// Bridge starts stopped instances of the On-Demand group when work
	// arrives that the running workers cannot take, and stops them again
	// once Spot instances take the work (docs/scaling.md, "Cold start");
	// off by default.
	Bridge Bridge `yaml:"bridge"`
	// Spot steers the Spot group away from recently interrupted instance
	// types and zones.
	Spot Spot `yaml:"spot"`
	// SpotPool keeps stopped Spot instances outside the group, started when
	// work arrives that the running workers cannot take (docs/scaling.md,
	// "Cold start: the Spot pool"); off by default.
	SpotPool SpotPool `yaml:"spot_pool"`

	// InstanceTypes are the EC2 instance types the group may launch, in
	// order of preference; all x86_64 or all arm64 (CDK app only).
	InstanceTypes []string `yaml:"instance_types"`
	// AMIID is the image the instances boot (CDK app only); set it or
	// AMISSMParameter.
	AMIID string `yaml:"ami_id"`
	// AMISSMParameter is an SSM parameter holding the image id, resolved by
	// EC2 at each launch (CDK app only).
	AMISSMParameter string `yaml:"ami_ssm_parameter"`
	// RootVolumeGB is the size of the instances' encrypted gp3 root volume
	// (CDK app only).
	RootVolumeGB int `yaml:"root_volume_gb"`
	// Agent is how the instances run the worker agent (CDK app only).
	Agent Agent `yaml:"agent"`
	// Tags are cost-allocation tags for the fleet's group, instances and
	// volumes, added to the stage's Tags (a key in both takes the fleet's
	// value; CDK app only).
	Tags map[string]string `yaml:"tags"`
}

// RetryPolicy says how often a failing job is tried and how long it waits
// between tries.
type RetryPolicy struct {
	// MaxAttempts is how many times a job is tried before it is dead.
	MaxAttempts int `yaml:"max_attempts"`
	// Backoff is the wait before the 2nd, 3rd, ... attempt; attempts past
	// the list's end wait its last entry.
	Backoff []Duration `yaml:"backoff"`
}

// Agent is how the instances of a fleet run `fleetq worker` (CDK app; the
// dev stack's local fleet runs the warm-up too).
type Agent struct {
	// Runner is what runs a job: comfyui (a ComfyUI server on the
	// instance) or exec (a command; docs/worker.md).
	Runner string `yaml:"runner"`
	// Exec is the exec runner's command, run with /bin/sh -c.
	Exec string `yaml:"exec"`
	// ComfyUIURL is the ComfyUI server the comfyui runner drives.
	ComfyUIURL string `yaml:"comfyui_url"`
	// DrainTimeout is how long an instance being scaled in or interrupted
	// lets running jobs finish before they are requeued; 0 requeues at once.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// Warmup is a job each instance runs after its runner is ready and
	// before it registers, to load the fleet's models (none by default); a
	// warm-up that fails marks the instance unhealthy.
	Warmup Warmup `yaml:"warmup"`
}

// Defaults applied to fields left out of the file.
const (
	DefaultJobRetention      = 30 * 24 * time.Hour
	DefaultRegistrationLimit = 10
	DefaultWaitConcurrency   = 50
	DefaultSlotsPerInstance  = 1
	DefaultMaxInstances      = 10
	DefaultIdleWindow        = 15 * time.Minute
	DefaultScaleInGrace      = 2 * time.Minute
	DefaultBootTimeout       = 10 * time.Minute
	DefaultWorkerCap         = 50
	DefaultLeaseSeconds      = 120
	DefaultReadyShards       = 1
	DefaultHeartbeatSeconds  = 30
	DefaultPollSeconds       = 5
	DefaultJobTimeout        = 90 * time.Minute
	DefaultQueueSLO          = 30 * time.Minute
	DefaultMaxAttempts       = 3
	DefaultPreemptionCap     = 5
	DefaultRootVolumeGB      = 100
	DefaultRunner            = "comfyui"
	DefaultComfyUIURL        = "http://127.0.0.1:8188"
)

// DefaultBackoff is the wait before the 2nd, 3rd and later attempts.
var DefaultBackoff = []time.Duration{2 * time.Minute, 10 * time.Minute, 30 * time.Minute}

// Source names where the config was read from ("config/dev.yaml", "built-in dev").
func (c *Config) Source() string { return c.source }

// Fleet returns the fleet with the given slug.
func (c *Config) Fleet(slug string) (*Fleet, bool) {
	for i := range c.Fleets {
		if c.Fleets[i].Slug == slug {
			return &c.Fleets[i], true
		}
	}
	return nil, false
}

// FleetForWorkflow returns the fleet that serves a workflow; a workflow
// belongs to exactly one fleet.
func (c *Config) FleetForWorkflow(workflow string) (*Fleet, bool) {
	for i := range c.Fleets {
		for _, w := range c.Fleets[i].Workflows {
			if w == workflow {
				return &c.Fleets[i], true
			}
		}
	}
	return nil, false
}

// Serves reports whether the fleet serves the workflow.
func (f *Fleet) Serves(workflow string) bool {
	for _, w := range f.Workflows {
		if w == workflow {
			return true
		}
	}
	return false
}

// MaxReadyShards bounds ready_shards: a poll reads one query per shard.
const MaxReadyShards = 16

// LeaseDuration is how long a lease lasts without a heartbeat.
func (f *Fleet) LeaseDuration() time.Duration { return time.Duration(f.LeaseSeconds) * time.Second }

// HeartbeatInterval is how often a worker heartbeats each running job.
func (f *Fleet) HeartbeatInterval() time.Duration {
	return time.Duration(f.HeartbeatSeconds) * time.Second
}

// BackoffBefore returns how long a job waits after its n-th failed attempt
// (n counts from 1); attempts past the end of the list reuse its last entry.
func (r RetryPolicy) BackoffBefore(n int) time.Duration {
	if len(r.Backoff) == 0 {
		return 0
	}
	if n < 1 {
		n = 1
	}
	if n > len(r.Backoff) {
		n = len(r.Backoff)
	}
	return r.Backoff[n-1].Std()
}

// Duration is a time.Duration written in YAML as a Go duration string
// ("90s", "15m", "1h30m") or as a whole number of seconds.
type Duration time.Duration

// Std returns the standard library duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats the duration the way it is written in the file.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts "15m" or 900.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			var n int64
			if _, scanErr := fmt.Sscanf(s, "%d", &n); scanErr == nil && fmt.Sprint(n) == s {
				*d = Duration(time.Duration(n) * time.Second)
				return nil
			}
			return fmt.Errorf("%q is not a duration (write e.g. 90s, 15m, 1h30m)", s)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := unmarshal(&n); err != nil {
		return fmt.Errorf("not a duration (write e.g. 90s, 15m, 1h30m)")
	}
	*d = Duration(time.Duration(n) * time.Second)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Names shared by the CDK app and the functions, so both sides of the
// deployment agree without configuration.
const (
	// TagStage and TagFleet are set on each fleet's Auto Scaling Group (and
	// propagated to its instances); the scaler's IAM permissions are scoped by them.
	TagStage = "fleetq:stage"
	TagFleet = "fleetq:fleet"
	// TagPool marks an instance of a fleet's stopped Spot pool (value
	// TagPoolSpot), which fleetq launches outside the fleet's groups.
	TagPool     = "fleetq:pool"
	TagPoolSpot = "spot"
)

// ASGName is the name of a fleet's Auto Scaling Group.
func ASGName(stage, fleet string) string { return "fleetq-" + stage + "-" + fleet }

// TableName is the name of a stage's DynamoDB table.
func TableName(stage string) string { return "fleetq-" + stage }
