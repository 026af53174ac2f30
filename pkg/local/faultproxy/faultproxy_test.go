package faultproxy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

type fixture struct {
	proxy *faultproxy.Proxy
	db    *dynamodb.Client // through the proxy, SDK retries off
	retry *dynamodb.Client // through the proxy, SDK retries on
	table string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv, err := localaws.StartDynamoDB("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	p, err := faultproxy.Start(srv.URL, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	f := &fixture{proxy: p, table: "t",
		db:    localaws.DynamoDBClient(p.URL, func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }),
		retry: localaws.DynamoDBClient(p.URL)}
	_, err = localaws.DynamoDBClient(srv.URL).CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(f.table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) put(db *dynamodb.Client, pk string) error {
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &f.table,
		Item: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}}})
	return err
}

func (f *fixture) exists(t *testing.T, pk string) bool {
	t.Helper()
	out, err := f.retry.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &f.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item != nil
}

func TestFaultsReachTheSDKAsTheServiceWouldSendThem(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		kind    faultproxy.Kind
		code    string // the API error code the SDK decodes, "" for a transport error
		status  int
		written bool
	}{
		{faultproxy.Throttle, "ProvisionedThroughputExceededException", 400, false},
		{faultproxy.ServerError, "InternalServerError", 500, false},
		{faultproxy.Unavailable, "ServiceUnavailable", 503, false},
		{faultproxy.ResetBefore, "", 0, false},
		{faultproxy.ResetAfter, "", 0, true},
	}
	for _, c := range cases {
		pk := string(c.kind)
		f.proxy.Next("PutItem", c.kind)
		err := f.put(f.db, pk)
		if err == nil {
			t.Fatalf("%s: the call succeeded", c.kind)
		}
		var ae smithy.APIError
		var re *smithyhttp.ResponseError
		switch {
		case c.code != "":
			if !errors.As(err, &ae) || ae.ErrorCode() != c.code || !errors.As(err, &re) || re.HTTPStatusCode() != c.status {
				t.Errorf("%s: error %v, want %s with status %d", c.kind, err, c.code, c.status)
			}
		case !strings.Contains(err.Error(), "connection reset") && !strings.Contains(err.Error(), "EOF"):
			t.Errorf("%s: error %v, want a reset connection", c.kind, err)
		}
		if got := f.exists(t, pk); got != c.written {
			t.Errorf("%s: item written = %v, want %v", c.kind, got, c.written)
		}
	}
	counts := f.proxy.Counts()
	for _, c := range cases {
		if counts[c.kind] != 1 {
			t.Errorf("counted %d faults of kind %s, want 1", counts[c.kind], c.kind)
		}
	}
}

func TestTheSDKRetriesThroughFaults(t *testing.T) {
	f := newFixture(t)
	f.proxy.Next("PutItem", faultproxy.ServerError, faultproxy.ResetBefore)
	if err := f.put(f.retry, "x"); err != nil {
		t.Fatalf("PutItem after two faults: %v", err)
	}
	if n := f.proxy.Calls("PutItem"); n != 3 {
		t.Fatalf("the proxy saw %d PutItem calls, want 3 (two faults, one success)", n)
	}
	if !f.exists(t, "x") {
		t.Fatal("not written")
	}
	// Queued faults apply to their operation only.
	f.proxy.Next("DeleteItem", faultproxy.Unavailable)
	if err := f.put(f.db, "y"); err != nil {
		t.Fatalf("PutItem with a fault queued for DeleteItem: %v", err)
	}
}

func TestRandomFaultsAtTheirRate(t *testing.T) {
	f := newFixture(t)
	f.proxy.SetOptions(faultproxy.Options{Rate: 1, Kinds: []faultproxy.Kind{faultproxy.Unavailable}, Ops: []string{"PutItem"}, Seed: 1})
	for i := 0; i < 5; i++ {
		if err := f.put(f.db, "r"); err == nil {
			t.Fatal("a call passed at rate 1")
		}
	}
	if _, err := f.db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &f.table}); err != nil {
		t.Fatalf("an operation outside Ops was faulted: %v", err)
	}
	if got := f.proxy.Counts()[faultproxy.Unavailable]; got != 5 {
		t.Fatalf("counted %d faults, want 5", got)
	}
	f.proxy.SetOptions(faultproxy.Options{Rate: 0.3, Seed: 7, Kinds: []faultproxy.Kind{faultproxy.Throttle}})
	failed := 0
	for i := 0; i < 200; i++ {
		if f.put(f.db, "r") != nil {
			failed++
		}
	}
	if failed < 30 || failed > 90 {
		t.Fatalf("%d of 200 calls failed at rate 0.3", failed)
	}
}

func TestQueryProtocolErrors(t *testing.T) {
	asg, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = asg.Close() })
	asg.PutGroup(localaws.ASGGroup{Name: "g", Max: 3})
	p, err := faultproxy.Start(asg.URL, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	client := autoscaling.NewFromConfig(localaws.Config(p.URL), func(o *autoscaling.Options) { o.Retryer = aws.NopRetryer{} })
	p.Next("SetDesiredCapacity", faultproxy.Throttle)
	_, err = client.SetDesiredCapacity(context.Background(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "Throttling" {
		t.Fatalf("SetDesiredCapacity = %v, want Throttling", err)
	}
	if asg.Desired("g") != 0 {
		t.Fatal("the throttled call changed the group")
	}
	if _, err := client.SetDesiredCapacity(context.Background(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)}); err != nil || asg.Desired("g") != 2 {
		t.Fatalf("the next call: %v, desired %d", err, asg.Desired("g"))
	}
	if p.Calls("SetDesiredCapacity") != 2 {
		t.Fatalf("calls = %d", p.Calls("SetDesiredCapacity"))
	}
}

func TestForwardedSeesWhatReachedTheService(t *testing.T) {
	f := newFixture(t)
	seen := make(chan string, 10)
	f.proxy.SetOptions(faultproxy.Options{Forwarded: func(op string) { seen <- op }})
	f.proxy.Next("PutItem", faultproxy.ResetBefore, faultproxy.ResetAfter)
	_ = f.put(f.db, "a") // never reached the service
	_ = f.put(f.db, "b") // reached it, answer lost
	_ = f.put(f.db, "c") // reached it, answered
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for i := 0; i < 2; i++ {
		select {
		case op := <-seen:
			if op != "PutItem" {
				t.Fatalf("Forwarded saw %q", op)
			}
		case <-deadline.C:
			t.Fatalf("Forwarded saw %d calls, want 2", i)
		}
	}
	if len(seen) != 0 || f.proxy.Calls("PutItem") != 3 {
		t.Fatalf("Forwarded saw more than the two calls that reached the service (%d calls)", f.proxy.Calls("PutItem"))
	}
}
