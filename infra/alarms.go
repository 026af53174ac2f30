package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
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

// alarms: per fleet, a job waiting over 30 minutes and a fleet at its max
// with a growing backlog; per stage, a non-empty DLQ and function errors;
// and a dashboard of the scaler's metrics.
func (s *Stack) alarms(cfg *fleetconfig.Config, dlq awssqs.Queue, fns []awslambda.Function) {
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
		metric(f.Slug, "OldestQueuedAgeSeconds", "Maximum").CreateAlarm(s.Stack, jsii.String(id+"OldestQueued"), &awscloudwatch.CreateAlarmOptions{
			AlarmName:        alarmName(f.Slug + "-oldest-queued"),
			AlarmDescription: jsii.String("A job of fleet " + f.Slug + " has waited more than 30 minutes for a lease."),
			Threshold:        jsii.Number(1800), EvaluationPeriods: jsii.Number(3), DatapointsToAlarm: jsii.Number(2),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
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
		atMax.CreateAlarm(s.Stack, jsii.String(id+"AtMaxGrowing"), &awscloudwatch.CreateAlarmOptions{
			AlarmName:        alarmName(f.Slug + "-at-max-growing"),
			AlarmDescription: jsii.String(fmt.Sprintf("Fleet %s is at its max of %d instances and its backlog keeps growing: raise max_instances or add instance types.", f.Slug, f.MaxInstances)),
			Threshold:        jsii.Number(1), EvaluationPeriods: jsii.Number(5), DatapointsToAlarm: jsii.Number(4),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
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
	dlq.MetricApproximateNumberOfMessagesVisible(nil).CreateAlarm(s.Stack, jsii.String("DLQNotEmpty"), &awscloudwatch.CreateAlarmOptions{
		AlarmName:        alarmName("submit-dlq-not-empty"),
		AlarmDescription: jsii.String("Submissions failed dispatch repeatedly and wait in the dead-letter queue."),
		Threshold:        jsii.Number(0), EvaluationPeriods: jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	for _, fn := range fns {
		name := *fn.Node().Id()
		fn.MetricErrors(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5))}).CreateAlarm(s.Stack, jsii.String(name+"Errors"), &awscloudwatch.CreateAlarmOptions{
			AlarmName:        alarmName(name + "-errors"),
			AlarmDescription: jsii.String("The " + name + " function failed."),
			Threshold:        jsii.Number(0), EvaluationPeriods: jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
	}
}
