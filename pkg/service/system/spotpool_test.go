package system_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awsevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/dispatchfn"
	"github.com/fleetq/fleetq/pkg/service/system/spotpools"
)

// In AWS the dispatch function's wake starts a stopped Spot pool instance
// when work arrives (not the scaler's next tick): built as its main builds
// it, from a Lambda environment pointing at the embedded DynamoDB, Auto
// Scaling and EC2, a submission to a fleet at zero with a stopped pool
// instance starts that instance through EC2, claims it in the store, and
// raises no group.
func TestDispatchFunctionStartsAStoppedPoolInstanceOnEnqueue(t *testing.T) {
	ctx := context.Background()
	lambdaAWSEnv(t)
	_, table := testenv.DynamoDB(t)
	as, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = as.Close() })
	as.PutGroup(localaws.ASGGroup{Name: "fleetq-dev-demo", Max: 4, InstanceTypes: []string{"g5.xlarge"}})
	a, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	clk := clock.NewFake(time.Now().UTC())
	a.SetClock(clk.Now)
	a.PutLaunchTemplate(localaws.LaunchTemplate{ID: "lt-00000000000000000", ImageID: "ami-0123456789abcdef0", InstanceType: "g5.xlarge"})
	file := filepath.Join(t.TempDir(), "dev.yaml")
	if err := os.WriteFile(file, []byte(`
stage: dev
region: us-east-1
tenants:
  - id: acme
fleets:
  - slug: demo
    workflows: [demo-sleep]
    instance_types: [g5.xlarge]
    max_instances: 4
    spot_pool:
      size: 3
      pairs:
        - {instance_type: g5.xlarge, zone: us-east-1a}
        - {instance_type: g5.xlarge, zone: us-east-1b}
        - {instance_type: g5.xlarge, zone: us-east-1c}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		awsenv.EnvStage: "dev", awsenv.EnvConfigFile: file, awsenv.EnvTable: table, awsenv.EnvLogLevel: "warn",
		awsenv.EnvDynamoDBEndpoint: testenv.DynamoDBEndpoint(t), awsenv.EnvAutoScalingEndpoint: as.URL,
		awsenv.EnvEC2Endpoint: a.URL, awsenv.EnvFleetGroups: `{"demo":"fleetq-dev-demo"}`,
	}
	getenv := func(k string) string { return vars[k] }
	l, err := system.LoadLambda(ctx, awsenv.Dispatch, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	// The pool holds one stopped instance, launched and stopped as the
	// scaler's refill does it.
	groups := scaler.Groups{Adapter: asg.New(autoscaling.NewFromConfig(localaws.Config(as.URL)), asg.Options{}),
		Names: map[string]string{"demo": "fleetq-dev-demo"}, Subnets: []scaler.Subnet{{ID: "subnet-0a", Zone: "us-east-1a"}}}
	pool := spotpools.NewPoolGroups(groups, ec2.NewFromConfig(localaws.Config(a.URL)), l.Config)
	pair := scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}
	id, err := pool.CreatePoolInstance(ctx, "demo", pair, 60)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := pool.StopPoolInstance(ctx, "demo", id); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	now := time.Now()
	if err := l.Store.AddPoolInstance(ctx, "demo", scaling.PoolInstance{ID: id, Pair: pair, State: scaling.PoolStopped,
		Since: now.Add(-time.Hour), Created: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}

	h, err := system.BuildLambda(ctx, dispatchfn.Function, getenv, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	dispatch := h.(func(context.Context, awsevents.SQSEvent) (awsevents.SQSEventResponse, error))
	if _, err := dispatch(ctx, sample[awsevents.SQSEvent](t, "sqs-submission-batch.json")); err != nil {
		t.Fatalf("dispatch: %v", err)
	}

	if in, _ := a.Instance(id); in.State != localaws.EC2Pending && in.State != localaws.EC2Running {
		t.Fatalf("pool instance after the enqueue: %+v; want started by dispatch", in)
	}
	rec, ok, err := l.Store.PoolInstanceOf(ctx, "demo", id)
	if err != nil || !ok || rec.State != scaling.PoolStarting || rec.StartFor != 1 {
		t.Fatalf("the pool's record: %+v, %v, %v; want starting for the one job", rec, ok, err)
	}
	st, err := l.Store.GetFleetState(ctx, "demo")
	if err != nil || st.LastDecision == nil || !strings.Contains(st.LastDecision.Reason.String(), "pool") {
		t.Fatalf("the fleet's last decision: %+v, %v; want the pool's start", st.LastDecision, err)
	}
	if d := as.Desired("fleetq-dev-demo"); d != 0 {
		t.Fatalf("the Spot group's desired is %d: the pool took the job, nothing else should launch", d)
	}
}
