package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// MetricsNamespace is where the scaler's Embedded Metric Format lines land.
const MetricsNamespace = "fleetq"

// DashboardMetrics are the scaler's per-fleet metrics the dashboard draws.
var DashboardMetrics = [][]string{
	{"QueueDepth", "Queued", "Leased"},
	{"DesiredCapacity", "InService", "ActiveWorkers", "AvailableCapacity"},
	{"OldestQueuedAgeSeconds", "JobProcessingP50"},
	{"ErrorRate", "LeaseExpiredCount", "SpotInterruptionCount", "BacklogPerInstance"},
}

// alarms: per fleet, its oldest ready job waiting past the fleet's
// queue_slo and the fleet at its max with a growing backlog; per stage, a
// non-empty DLQ and function errors; and a dashboard of the scaler's
// metrics. Every alarm notifies (when it fires and when it clears) the
// stage's SNS topic, to which each of the config's alarm emails subscribes.
func (s *Stack) alarms(cfg *fleetconfig.Config, dlqs []awssqs.Queue, fns []awslambda.Function) {
	for _, email := range cfg.Alarms.Emails {
		s.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(email), nil))
	}
	notify := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	wire := func(a awscloudwatch.Alarm) {
		a.AddAlarmAction(notify)
		a.AddOkAction(notify)
	}
	metric := func(fleet, name, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{"Stage": jsii.String(cfg.Stage), "FleetSlug": jsii.String(fleet)},
			Statistic:     jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(1)),
		})
	}
	alarmName := func(s string) *string { return jsii.String("fleetq-" + cfg.Stage + "-" + s) }
	dash := awscloudwatch.NewDashboard(s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{DashboardName: alarmName("fleets")})
	for _, f := range cfg.Fleets {
		id := camel(f.Slug)
		slo := f.QueueSLO.Std()
		if slo <= 0 {
			slo = fleetconfig.DefaultQueueSLO
		}
		wire(metric(f.Slug, "OldestQueuedAgeSeconds", "Maximum").CreateAlarm(s.Stack, jsii.String(id+"OldestQueued"), &awscloudwatch.CreateAlarmOptions{
			AlarmName: alarmName(f.Slug + "-oldest-queued"),
			AlarmDescription: jsii.String(fmt.Sprintf("The oldest ready job of fleet %s has waited more than its queue_slo (%s) for a lease: "+
				"no Spot capacity (add instance types, check the Spot vCPU quota) or workers that do not register (see the fleet's worker logs).", f.Slug, slo)),
			Threshold: jsii.Number(slo.Seconds()), EvaluationPeriods: jsii.Number(3), DatapointsToAlarm: jsii.Number(2),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		}))
		// At max with a growing backlog: desired has reached the group's
		// max and the work (ready + leased) rose over the last 5 minutes.
		atMax := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf("IF(desired >= %d AND DIFF(depth) > 0, 1, 0)", f.MaxInstances)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"desired": metric(f.Slug, "DesiredCapacity", "Maximum"),
				"depth":   metric(f.Slug, "QueueDepth", "Maximum"),
			},
			Period: awscdk.Duration_Minutes(jsii.Number(1)),
			Label:  jsii.String("at max and growing"),
		})
		wire(atMax.CreateAlarm(s.Stack, jsii.String(id+"AtMaxGrowing"), &awscloudwatch.CreateAlarmOptions{
			AlarmName:        alarmName(f.Slug + "-at-max-growing"),
			AlarmDescription: jsii.String(fmt.Sprintf("Fleet %s is at its max of %d instances and its backlog keeps growing: raise max_instances or add instance types.", f.Slug, f.MaxInstances)),
			Threshold:        jsii.Number(1), EvaluationPeriods: jsii.Number(5), DatapointsToAlarm: jsii.Number(4),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		}))
		// Unhealthy workers that stay: a sick machine is replaced on the
		// next tick, so one that lasts means the replacements turn sick too
		// (a bad driver or AMI) or cannot be terminated.
		wire(metric(f.Slug, "UnhealthyWorkers", "Maximum").CreateAlarm(s.Stack, jsii.String(id+"UnhealthyWorkers"), &awscloudwatch.CreateAlarmOptions{
			AlarmName: alarmName(f.Slug + "-unhealthy-workers"),
			AlarmDescription: jsii.String(fmt.Sprintf("Fleet %s has had workers that reported their machine sick (a GPU, or a runner down) "+
				"for most of 15 minutes: replacements keep turning sick (check the driver and the AMI, and the worker logs' reason) or are not terminated.", f.Slug)),
			Threshold: jsii.Number(1), EvaluationPeriods: jsii.Number(15), DatapointsToAlarm: jsii.Number(12),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		}))
		var widgets []awscloudwatch.IWidget
		for _, row := range DashboardMetrics {
			var ms []awscloudwatch.IMetric
			for _, m := range row {
				ms = append(ms, metric(f.Slug, m, "Average"))
			}
			widgets = append(widgets, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
				Title: jsii.String(f.Slug + ": " + row[0]), Left: &ms, Width: jsii.Number(6),
			}))
		}
		dash.AddWidgets(widgets...)
	}
	queues := []struct{ id, name, what string }{
		{"DLQNotEmpty", "submit-dlq-not-empty", "Submissions failed dispatch repeatedly and wait in the dead-letter queue."},
		{"FailedEventsNotEmpty", "failed-events-not-empty", "A scaler tick or an interruption event could not be handled and waits in the failed-events queue."},
	}
	for i, q := range dlqs {
		wire(q.MetricApproximateNumberOfMessagesVisible(nil).CreateAlarm(s.Stack, jsii.String(queues[i].id), &awscloudwatch.CreateAlarmOptions{
			AlarmName:        alarmName(queues[i].name),
			AlarmDescription: jsii.String(queues[i].what),
			Threshold:        jsii.Number(0), EvaluationPeriods: jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		}))
	}
	for _, fn := range fns {
		name := *fn.Node().Id()
		wire(fn.MetricErrors(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5))}).CreateAlarm(s.Stack, jsii.String(name+"Errors"), &awscloudwatch.CreateAlarmOptions{
			AlarmName:        alarmName(name + "-errors"),
			AlarmDescription: jsii.String("The " + name + " function failed."),
			Threshold:        jsii.Number(0), EvaluationPeriods: jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		}))
	}
}
