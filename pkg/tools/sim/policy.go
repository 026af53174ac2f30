package sim

import (
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Trigger says why a policy is asked to decide.
type Trigger int

const (
	// Tick is the policy's own schedule (Interval).
	Tick Trigger = iota
	// Arrival is a job just queued (policies that wake on enqueue act on it).
	Arrival
	// Idle is an instance whose last job just ended.
	Idle
	// PoolFailed is a start of a Spot pool instance that failed for want
	// of Spot capacity (Observation.FailedStart).
	PoolFailed
)

// InstanceView is an instance as the control plane sees it.
type InstanceView struct {
	ID         int
	LaunchedAt time.Duration
	// Registered is false while the instance boots.
	Registered bool
	// Draining is true after a Spot interruption notice.
	Draining  bool
	Busy      int           // jobs running on it
	IdleSince time.Duration // when it last had no job (meaningful when Busy is 0)
	// OnDemand is true for an instance of the On-Demand group; Bridge for
	// one of a group with a warm pool (fleetq's bridge).
	OnDemand, Bridge bool
	// PoolID names the Spot pool's instance this one is (fleetq's Spot
	// pool); empty for the groups' instances.
	PoolID string
}

// Observation is what a policy can see at one instant.
type Observation struct {
	Now time.Duration
	// Queued and Leased are job records: waiting, and running.
	Queued, Leased int
	Instances      []InstanceView
	// Desired is the Spot group's desired capacity, OnDemandDesired the
	// On-Demand group's.
	Desired         int
	OnDemandDesired int
	// SpotShortSince is when the Spot group's launches began failing for
	// lack of capacity, -1 while they do not.
	SpotShortSince time.Duration
	// OldestQueued is when the oldest queued job arrived, -1 with none.
	OldestQueued time.Duration
	// PinnedQueued and PinnedLeased are the queued and leased jobs (counted
	// in Queued and Leased too) that only On-Demand instances may run.
	PinnedQueued, PinnedLeased int
	// Capped is true when tenants' caps apply; then Runnable is the queued
	// and leased work the caps let run.
	Capped   bool
	Runnable int
	// Pool is the Spot pool's instances as the store records them;
	// FailedStart the pool start that failed (Trigger PoolFailed).
	Pool         []scaling.PoolInstance
	FailedStart  *scaling.PoolOrder
	Slots        int
	MinInstances int
	MaxInstances int
}

// Action is a policy's answer.
type Action struct {
	// Desired is the new desired capacity, or -1 to leave it.
	Desired int
	// Terminate names instances to terminate, each lowering the desired
	// capacity by one (TerminateInstanceInAutoScalingGroup with decrement).
	Terminate []int
	// SetOnDemand sets the On-Demand group's desired capacity to
	// OnDemandDesired (policies with an On-Demand rung).
	SetOnDemand     bool
	OnDemandDesired int
	// Drain names instances that take no new work from now on.
	Drain []int
	// PoolStarts, PoolStops, PoolEnds and PoolCreates are the Spot pool's
	// orders (scaling.DecidePool): instances to start, to stop back into
	// the pool, to end, and pairs to create one on.
	PoolStarts  []scaling.PoolOrder
	PoolStops   []string
	PoolEnds    []string
	PoolCreates []scaling.Pair
}

// Keep leaves everything as it is.
var Keep = Action{Desired: -1}

// VictimRule is who leaves when the desired capacity drops below the live
// instances.
type VictimRule int

const (
	// VictimNamed: the policy names its victims (scale-in protection on,
	// the group never chooses).
	VictimNamed VictimRule = iota
	// VictimRandom: the Auto Scaling Group chooses (its default termination
	// policy balances zones and prefers old launch templates, which is
	// blind to which instances are busy; modelled as a random choice).
	VictimRandom
	// VictimNewest: Kubernetes' ReplicaSet removes the most recently
	// started pods first.
	VictimNewest
)

// Policy is a scaling policy under simulation.
type Policy interface {
	Name() string
	// Interval is how often Decide(Tick) runs.
	Interval() time.Duration
	Victims() VictimRule
	Decide(Trigger, Observation) Action
}

// Sample is one point of a run's timeline.
type Sample struct {
	At        time.Duration
	InService int // registered, not draining
	Running   int // jobs running
	Waiting   int // jobs queued
}

// Result is one policy's run over one workload.
type Result struct {
	Policy       string  `json:"policy"`
	Workload     string  `json:"-"`
	Jobs         int     `json:"jobs"`
	Completed    int     `json:"completed"`
	Killed       int     `json:"killed"`
	SpotRequeued int     `json:"spot_requeued"`
	P50WaitS     float64 `json:"p50_wait_s"`
	P95WaitS     float64 `json:"p95_wait_s"`
	TTFLIdleMaxS float64 `json:"ttfl_idle_max_s"`
	TTFLIdleP50S float64 `json:"ttfl_idle_p50_s"`
	ColdStarts   int     `json:"cold_starts"`
	GPUHours     float64 `json:"gpu_hours"`
	BusyGPUHours float64 `json:"busy_gpu_hours"`
	Utilization  float64 `json:"utilization"`
	CostUSD      float64 `json:"cost_usd"`
	// CostPerJobUSD is the bill over the jobs completed: each job's leased
	// time plus its share of the boot and idle time the fleet paid for.
	CostPerJobUSD float64 `json:"cost_per_job_usd"`
	// CostByWorkflow shares CostUSD among the workflows by the time their
	// jobs held a slot (interrupted and killed runs included).
	CostByWorkflow    map[string]float64 `json:"cost_by_workflow_usd"`
	PeakInstances     int                `json:"peak_instances"`
	Launches          int                `json:"launches"`
	SpotInterruptions int                `json:"spot_interruptions"`
	// SpotLaunchFailures counts the group's Spot launch attempts refused
	// for lack of capacity; OnDemandLaunches the instances launched on
	// On-Demand, OnDemandGPUHours their hours, OnDemandEndS when the last
	// of them ended (seconds from the start; 0: none).
	SpotLaunchFailures int     `json:"spot_launch_failures"`
	OnDemandLaunches   int     `json:"on_demand_launches"`
	OnDemandGPUHours   float64 `json:"on_demand_gpu_hours"`
	OnDemandEndS       float64 `json:"on_demand_end_s"`
	// Dead counts jobs that reached the preemption cap under a policy with
	// no On-Demand rung; PinnedToOnDemand those that reached it under one
	// and were leased only by On-Demand instances from then on.
	Dead             int `json:"dead"`
	PinnedToOnDemand int `json:"pinned_to_on_demand"`
	// OnDemandStartsAfterSpot counts jobs started on On-Demand instances
	// more than a minute (a tick) after Spot launches succeeded again.
	OnDemandStartsAfterSpot int `json:"on_demand_starts_after_spot"`
	// BridgeStarts counts bridge instances started from the warm pool,
	// BridgeFreshLaunches those launched fresh because the pool had none
	// stopped yet, BridgeGPUHours their On-Demand hours, BridgedJobs the
	// jobs first started on one, and PoolStorageUSD the pool's volumes
	// (in CostUSD).
	BridgeStarts        int     `json:"bridge_starts,omitempty"`
	BridgeFreshLaunches int     `json:"bridge_fresh_launches,omitempty"`
	BridgeGPUHours      float64 `json:"bridge_gpu_hours,omitempty"`
	BridgedJobs         int     `json:"bridged_jobs,omitempty"`
	PoolStorageUSD      float64 `json:"pool_storage_usd,omitempty"`
	// The Spot pool's (fleetq's, --spot-pool): PoolStarts counts the
	// instances started, PoolStartFailures the starts refused for want of
	// Spot capacity, PoolFallbackJobs the jobs of those no other pool
	// start took (handed to the bridge, or left to the next decision), PoolStops the instances stopped back into the pool,
	// PoolCreates those launched to refill it, PoolInterruptions those EC2
	// stopped, PoolJobs the jobs first started on one, SpotPoolGPUHours
	// their Spot hours (in GPUHours, a minute at least per start), and
	// SpotPoolStorageUSD the volumes (in CostUSD). PoolBusyStops (stops of
	// an instance running a job) and PoolBadStarts (starts of an instance
	// not stopped) are the policy's faults: both must stay 0.
	PoolStarts         int     `json:"pool_starts,omitempty"`
	PoolStartFailures  int     `json:"pool_start_failures,omitempty"`
	PoolFallbackJobs   int     `json:"pool_fallback_jobs,omitempty"`
	PoolStops          int     `json:"pool_stops,omitempty"`
	PoolCreates        int     `json:"pool_creates,omitempty"`
	PoolInterruptions  int     `json:"pool_interruptions,omitempty"`
	PoolJobs           int     `json:"pool_jobs,omitempty"`
	PoolBusyStops      int     `json:"pool_busy_stops,omitempty"`
	PoolBadStarts      int     `json:"pool_bad_starts,omitempty"`
	SpotPoolGPUHours   float64 `json:"spot_pool_gpu_hours,omitempty"`
	SpotPoolStorageUSD float64 `json:"spot_pool_storage_usd,omitempty"`
	// P95WaitByTenantS is each tenant's p95 wait, for workloads with more
	// than one tenant.
	P95WaitByTenantS map[string]float64 `json:"p95_wait_by_tenant_s,omitempty"`
	// MaxWaitS is the longest queue wait of a job that started.
	MaxWaitS float64 `json:"max_wait_s"`
	// Queued and Running are jobs not finished when the horizon ended.
	Queued   int      `json:"unfinished_queued"`
	Running  int      `json:"unfinished_running"`
	Timeline []Sample `json:"-"`
	// KillTimes are when busy instances were terminated, one per job killed.
	KillTimes []time.Duration `json:"-"`
	// WorkloadEnd is the end of the workload's last day of arrivals.
	WorkloadEnd time.Duration `json:"-"`
	// Estimates are fleetq's start estimates against the actual leases
	// (Options.Estimates; nil when not measured).
	Estimates *Estimates `json:"estimates,omitempty"`
}

func ceilDiv(a, b int) int {
	if b <= 0 {
		b = 1
	}
	return (a + b - 1) / b
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }
