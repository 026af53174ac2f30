package scaler

import (
	"io"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/metrics"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Namespace is the CloudWatch namespace of the scaler's metrics.
const Namespace = "fleetq"

// writeEMF writes a fleet's metrics as one Embedded Metric Format line
// (dimensions Stage and FleetSlug).
func writeEMF(w io.Writer, stage, fleet string, m FleetMetrics, at time.Time) error {
	count := func(name string, v int) metrics.Metric {
		return metrics.Metric{Name: name, Unit: metrics.UnitCount, Value: float64(v)}
	}
	return metrics.Emit(w, Namespace, map[string]string{"Stage": stage, "FleetSlug": fleet}, []metrics.Metric{
		count("QueueDepth", m.QueueDepth),
		count("Queued", m.Queued),
		count("Leased", m.Leased),
		{Name: "BacklogPerInstance", Unit: metrics.UnitCount, Value: m.BacklogPerInstance},
		count("ActiveWorkers", m.ActiveWorkers),
		count("AvailableCapacity", m.AvailableCapacity),
		count("DesiredCapacity", m.DesiredCapacity),
		count("InService", m.InService),
		{Name: "OldestQueuedAgeSeconds", Unit: metrics.UnitSeconds, Value: m.OldestQueuedAgeSeconds},
		{Name: "JobProcessingP50", Unit: metrics.UnitSeconds, Value: m.JobProcessingP50},
		{Name: "ErrorRate", Unit: metrics.UnitPercent, Value: m.ErrorRate},
		count("LeaseExpiredCount", m.LeaseExpiredCount),
		count("SpotInterruptionCount", m.SpotInterruptionCount),
		count("UnhealthyWorkers", m.UnhealthyWorkers),
	}, at)
}

// writeBootEMF writes a fleet's boot timeline as one EMF line per phase
// (dimensions Stage, FleetSlug and Phase): the phase's median, 95th
// percentile and longest over the workers registered within BootWindow,
// and how many workers have it. No phase, no line.
func writeBootEMF(w io.Writer, stage, fleet string, tl worker.Timeline, at time.Time) error {
	for _, p := range tl.Phases {
		err := metrics.Emit(w, Namespace, map[string]string{"Stage": stage, "FleetSlug": fleet, "Phase": p.Name}, []metrics.Metric{
			{Name: "BootPhaseP50Seconds", Unit: metrics.UnitSeconds, Value: p.P50.Seconds()},
			{Name: "BootPhaseP95Seconds", Unit: metrics.UnitSeconds, Value: p.P95.Seconds()},
			{Name: "BootPhaseMaxSeconds", Unit: metrics.UnitSeconds, Value: p.Max.Seconds()},
			{Name: "BootPhaseWorkers", Unit: metrics.UnitCount, Value: float64(p.Workers)},
		}, at)
		if err != nil {
			return err
		}
	}
	return nil
}
