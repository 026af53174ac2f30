package auth

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func TestParseFleetSecret(t *testing.T) {
	for in, want := range map[string][]string{
		"s3cret":                               {"s3cret"},
		" s3cret\n":                            {"s3cret"},
		`{"current":"new","previous":"old"}`:   {"new", "old"},
		`{"current":"new"}`:                    {"new"},
		`{"current":"same","previous":"same"}`: {"same"},
		"":                                     nil,
		`{"previous":"old"}`:                   nil,
		`{"current":"new","next":"x"}`:         nil,
		`{"current":"new","previous":"old"} junk`: {"new", "old"},
	} {
		got, err := ParseFleetSecret(in)
		if !slices.Equal(got, want) || (want == nil) != (err != nil) {
			t.Errorf("ParseFleetSecret(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if !EqualAny("old", []string{"new", "old"}) || EqualAny("older", []string{"new", "old"}) || EqualAny("", nil) {
		t.Fatal("EqualAny is wrong")
	}
}

// Each fleet reads its own secret; a rotation's two values are both
// accepted; a fleet without a secret accepts none.
func TestSecretsManagerFleetSecrets(t *testing.T) {
	srv, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const a, b = "arn:aws:secretsmanager:us-east-1:123456789012:secret:FleetASecret-AbCdEf", "arn:aws:secretsmanager:us-east-1:123456789012:secret:FleetBSecret-AbCdEf"
	srv.PutSecretValue(a, "secret-a")
	srv.PutSecretValue(b, "secret-b")
	client := secretsmanager.NewFromConfig(awsenv.Static(""), func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := &SecretsManagerFleetSecrets{Client: client, ARNs: map[string]string{"a": a, "b": b}, TTL: time.Minute, Clock: clk}
	ctx := context.Background()
	if got, err := src.FleetSecrets(ctx, "a"); err != nil || !slices.Equal(got, []string{"secret-a"}) {
		t.Fatalf("fleet a: %q, %v", got, err)
	}
	if got, err := src.FleetSecrets(ctx, "c"); err != nil || got != nil {
		t.Fatalf("fleet c: %q, %v", got, err)
	}
	srv.PutSecretValue(a, `{"current":"secret-a2","previous":"secret-a"}`)
	clk.Advance(time.Minute)
	if got, _ := src.FleetSecrets(ctx, "a"); !slices.Equal(got, []string{"secret-a2", "secret-a"}) {
		t.Fatalf("during the rotation: %q", got)
	}
	if got, _ := src.FleetSecrets(ctx, "b"); !slices.Equal(got, []string{"secret-b"}) {
		t.Fatalf("fleet b: %q", got)
	}
}
