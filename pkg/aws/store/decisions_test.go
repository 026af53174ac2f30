package store_test

import (
	"context"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// rawFleet is a store over a fresh table and the table's client, to read and
// write a fleet's state item as a release laid it out.
func rawFleet(t *testing.T) (*store.Store, *dynamodb.Client, string) {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	client, table := testenv.DynamoDB(t)
	st := store.New(client, store.Options{Table: table, Config: cfg, Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler)})
	return st, client, table
}

func fleetStateKey(fleet string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{store.AttrPK: &types.AttributeValueMemberS{Value: "FLEET#" + fleet},
		store.AttrSK: &types.AttributeValueMemberS{Value: "STATE"}}
}

func num(n string) types.AttributeValue { return &types.AttributeValueMemberN{Value: n} }
func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// A tick's decision is stored as every release reads it — its reason's
// line a string under reason, its inputs a map of counts under inputs —
// with its reason's code beside it, and reads back as it was made.
func TestDecisionReasonAndInputsReadBack(t *testing.T) {
	t.Parallel()
	st, client, table := rawFleet(t)
	ctx := context.Background()
	pd := scaling.Decide(scaling.Input{Now: t0, Settings: scaling.Settings{Slots: 2, Max: 10}, Ready: 5})
	in := fleetstate.NewTickInputs(pd.Counts, 1, 2)
	in.Forecast = &fleetstate.ForecastInputs{Instances: 4, Extra: 1}
	d := fleetstate.Decision{At: t0, Desired: pd.Desired, Reason: pd.Reason.With("tenant caps"), Inputs: in, InService: 0}
	if err := st.RecordDecision(ctx, "gpu", fleetstate.Record{Decision: d, LastActiveAt: t0}, fleetstate.State{}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetFleetState(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if got.LastDecision == nil || !reflect.DeepEqual(*got.LastDecision, d) || len(got.History) != 1 || !reflect.DeepEqual(got.History[0], d) {
		t.Fatalf("read back %+v, history %+v\nwant %+v", got.LastDecision, got.History, d)
	}
	if got.LastDecision.Reason.Code() != scaling.ReasonGrow {
		t.Fatalf("code %q, want grow", got.LastDecision.Reason.Code())
	}
	raw, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: fleetStateKey("gpu")})
	if err != nil {
		t.Fatal(err)
	}
	last, ok := raw.Item["last_decision"].(*types.AttributeValueMemberM)
	if !ok {
		t.Fatalf("last_decision stored as %T", raw.Item["last_decision"])
	}
	if r, ok := last.Value["reason"].(*types.AttributeValueMemberS); !ok || r.Value != d.Reason.String() {
		t.Fatalf("reason stored as %#v, want the string %q", last.Value["reason"], d.Reason)
	}
	if c, ok := last.Value["reason_code"].(*types.AttributeValueMemberS); !ok || c.Value != "grow" {
		t.Fatalf("reason_code stored as %#v", last.Value["reason_code"])
	}
	inputs, ok := last.Value["inputs"].(*types.AttributeValueMemberM)
	if !ok {
		t.Fatalf("inputs stored as %T", last.Value["inputs"])
	}
	want := in.Map()
	if len(inputs.Value) != len(want) || inputs.Value["cap_held"] == nil || inputs.Value["forecast_extra"] == nil || inputs.Value["need"] == nil {
		t.Fatalf("inputs stored under %v, want %v", slices.Sorted(maps.Keys(inputs.Value)), want)
	}
}

// A fleet state an earlier release wrote — reasons without a code, inputs
// as maps — reads as it was, and a wake after it keeps the old decision in
// the history word for word, its inputs' keys and all.
func TestOldDecisionRecordReads(t *testing.T) {
	t.Parallel()
	st, client, table := rawFleet(t)
	ctx := context.Background()
	old := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"at": str("2026-11-01T12:00:00Z"), "desired": num("0"), "in_service": num("0"),
		"reason": str("shrink 2→0: no work for 15m0s (idle window 15m0s); have 0 busy, 2 idle, 0 booting"),
		"inputs": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"ready": num("0"), "leased": num("0"), "delayed": num("0"), "need": num("0"), "instances": num("2"),
			"booting": num("0"), "busy": num("0"), "idle": num("2"), "draining": num("0"), "unresponsive": num("0"),
			"unhealthy": num("0"), "gpu_memory_free": num("12"),
		}},
	}}
	item := fleetStateKey("gpu")
	item["desired"], item["workers"], item["decision_seq"] = num("0"), num("0"), num("1")
	item["last_decision"], item["history"] = old, &types.AttributeValueMemberL{Value: []types.AttributeValue{old}}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	s, err := st.GetFleetState(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	d := s.LastDecision
	if d == nil || d.Reason.Code() != "" || d.Reason.String() != "shrink 2→0: no work for 15m0s (idle window 15m0s); have 0 busy, 2 idle, 0 booting" ||
		d.Inputs.Tick == nil || d.Inputs.Tick.Instances != 2 || d.Inputs.Tick.Idle != 2 || d.Inputs.Map()["gpu_memory_free"] != 12 ||
		!d.At.Equal(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("old decision read as %+v", d)
	}
	if ok, err := st.WakeFleet(ctx, "gpu", 1, 1, scaling.WakeReason(1)); err != nil || !ok {
		t.Fatalf("wake: %v %v", ok, err)
	}
	raw, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: fleetStateKey("gpu")})
	if err != nil {
		t.Fatal(err)
	}
	hist := raw.Item["history"].(*types.AttributeValueMemberL).Value
	if len(hist) != 2 {
		t.Fatalf("history of %d after the wake", len(hist))
	}
	kept := hist[1].(*types.AttributeValueMemberM).Value
	if _, ok := kept["reason_code"]; ok || !reflect.DeepEqual(kept["reason"], old.Value["reason"]) || !reflect.DeepEqual(kept["inputs"], old.Value["inputs"]) {
		t.Fatalf("old decision rewritten as %#v, want %#v", kept, old.Value)
	}
}

// Bridges started on enqueue are recorded with the reason and inputs the
// waker gave, and the desired capacity the store read before and after.
func TestRecordBridgeStartWritesWhatItIsGiven(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if ok, err := e.st.WakeFleet(e.ctx, "gpu", 4, 2, scaling.WakeReason(4)); err != nil || !ok {
		t.Fatalf("wake: %v %v", ok, err)
	}
	why := scaling.BridgeStartReason(1, 4, 0, scaling.SpotLaunching)
	if err := e.st.RecordBridgeStart(e.ctx, "gpu", 1, why, fleetstate.NewBridgeStartInputs(4, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	s, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	d := s.LastDecision
	want := map[string]int{"ready": 4, "idle": 0, "free_slots": 0, "on_demand_desired": 1, "desired_before": 2, "desired_after": 3}
	if d == nil || d.Reason != why || d.Desired != 3 || !maps.Equal(d.Inputs.Map(), want) || s.Desired != 3 {
		t.Fatalf("bridge start recorded as %+v (desired %d); want %q, inputs %v", d, s.Desired, why, want)
	}
	if len(s.History) != 2 || s.History[1].Reason.Code() != scaling.ReasonWake {
		t.Fatalf("history %+v", s.History)
	}
}

// The tick keeps the fleet's latest boots with its decision; a decision
// without boots leaves them.
func TestTheFleetStateKeepsTheLatestBoots(t *testing.T) {
	e := newEnv(t)
	boots := []time.Duration{time.Minute, 90 * time.Second}
	if err := e.record("gpu", fleetstate.Record{Decision: fleetstate.Decision{At: t0, Desired: 1}, Boots: boots}); err != nil {
		t.Fatal(err)
	}
	if err := e.record("gpu", fleetstate.Record{Decision: fleetstate.Decision{At: t0.Add(time.Minute), Desired: 1}}); err != nil {
		t.Fatal(err)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Boots, boots) {
		t.Fatalf("boots %v, want %v", st.Boots, boots)
	}
}
