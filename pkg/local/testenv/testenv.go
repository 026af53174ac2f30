package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/local/dynalite"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// EnvDynamoDBEndpoint names an external DynamoDB endpoint to test against.
const EnvDynamoDBEndpoint = "FLEETQ_TEST_DYNAMODB_ENDPOINT"

// EnvDynalite, set to 1, runs the tests against dynalite (installed by make
// dynalite-deps) with its transactions added, started once per test binary;
// see pkg/local/dynalite. It fails the tests when dynalite is not installed.
const EnvDynalite = "FLEETQ_TEST_DYNALITE"

// OnDynalite reports whether the tests run against dynalite (EnvDynalite),
// for the few tests that need what it lacks; they skip and say why.
func OnDynalite() bool { return os.Getenv(EnvDynalite) == "1" }

var (
	ddbOnce     sync.Once
	ddbEndpoint string
	ddbErr      error
	dynaliteSrv *dynalite.Server
	tableSeq    atomic.Int64
)

// DynamoDBEndpoint returns the endpoint tests use: the external one when
// FLEETQ_TEST_DYNAMODB_ENDPOINT is set, else an embedded server shared by the
// test binary.
func DynamoDBEndpoint(tb testing.TB) string {
	tb.Helper()
	ddbOnce.Do(func() {
		if ep := os.Getenv(EnvDynamoDBEndpoint); ep != "" {
			ddbEndpoint = ep
			return
		}
		if OnDynalite() {
			dir, err := dynalite.Dir()
			if err == nil {
				// Held for the binary's life: dynalite exits when the
				// server's stdin pipe is closed, which a collected
				// Server would do.
				if dynaliteSrv, err = dynalite.Start(dir); err == nil {
					ddbEndpoint = dynaliteSrv.URL
				}
			}
			ddbErr = err
			return
		}
		srv, err := localaws.StartDynamoDB("")
		if err != nil {
			ddbErr = err
			return
		}
		ddbEndpoint = srv.URL
	})
	if ddbErr != nil {
		tb.Fatalf("start the test DynamoDB: %v", ddbErr)
	}
	return ddbEndpoint
}

// StackDynamoDB answers the DynamoDB endpoint the dev stacks a test starts
// use (devstack.Options.DynamoDBEndpoint): the external one when
// FLEETQ_TEST_DYNAMODB_ENDPOINT is set, dynalite with FLEETQ_TEST_DYNALITE=1,
// else "" (each stack serves its own). It is the one place suites that
// start a dev stack learn the test endpoint; it sets nothing, so their
// tests may run in parallel.
func StackDynamoDB(tb testing.TB) string {
	tb.Helper()
	if os.Getenv(EnvDynamoDBEndpoint) == "" && !OnDynalite() {
		return ""
	}
	return DynamoDBEndpoint(tb)
}

// DynamoDB returns a real SDK client and the name of a fresh fleetq table.
// Extra client options (such as a request counter) may be passed.
func DynamoDB(tb testing.TB, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, string) {
	tb.Helper()
	client := localaws.DynamoDBClient(DynamoDBEndpoint(tb), optFns...)
	table := TableName(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.CreateTable(ctx, client, table); err != nil {
		tb.Fatalf("create table %s: %v", table, err)
	}
	tb.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return client, table
}

// TableName returns a table name unique in this test binary, made of the
// test's name with every character DynamoDB refuses in a table name (it
// takes [a-zA-Z0-9_.-]) turned into '-': subtests are often named by
// fmt.Sprint of a slice, brackets and spaces included.
func TableName(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, tb.Name())
	if len(name) > 150 {
		name = name[:150]
	}
	return fmt.Sprintf("fleetq-%s-%d-%d", name, os.Getpid(), tableSeq.Add(1))
}

// Counter returns a DynamoDB client option counting requests into n.
func Counter(n *atomic.Int64) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, awsenv.CountRequests(n)) }
}

// ModeledDynamoDB starts an embedded DynamoDB-API server of the test's own
// with the options' capacity model and index lag (localaws.DynamoDBOptions),
// and returns a real SDK client and a fresh fleetq table on it. The model
// is reset once the table exists, so it counts only what the test does.
// The capacity model is the embedded server's, so the test is skipped when
// the tests run against another endpoint.
func ModeledDynamoDB(tb testing.TB, o localaws.DynamoDBOptions, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, string) {
	tb.Helper()
	if os.Getenv(EnvDynamoDBEndpoint) != "" || OnDynalite() {
		tb.Skip("the capacity model is the embedded DynamoDB server's")
	}
	srv, err := localaws.StartDynamoDBWith("", o)
	if err != nil {
		tb.Fatalf("start the modeled DynamoDB: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	client := localaws.DynamoDBClient(srv.URL, optFns...)
	table := TableName(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.CreateTable(ctx, client, table); err != nil {
		tb.Fatalf("create table %s: %v", table, err)
	}
	if o.Capacity != nil {
		o.Capacity.Reset()
	}
	return client, table
}
