package jobevents

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// fakeEventBridge speaks EventBridge's JSON 1.1 protocol for PutEvents and
// refuses the entries whose detail-type is in refuse.
type fakeEventBridge struct {
	mu      sync.Mutex
	calls   int
	entries []map[string]any
	refuse  map[string]bool
}

func (f *fakeEventBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
		http.Error(w, `{"__type":"UnknownOperationException"}`, http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var in struct{ Entries []map[string]any }
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, `{"__type":"SerializationException"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	var out struct {
		FailedEntryCount int
		Entries          []map[string]string
	}
	for i, e := range in.Entries {
		if f.refuse[e["DetailType"].(string)] {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, map[string]string{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"})
			continue
		}
		f.entries = append(f.entries, e)
		out.Entries = append(out.Entries, map[string]string{"EventId": fmt.Sprintf("ev-%d-%d", f.calls, i)})
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func events(n int, typ string) []jobevent.Event {
	var out []jobevent.Event
	for i := range n {
		id := fmt.Sprintf("job-%d@1", i)
		out = append(out, jobevent.Event{ID: id, DetailType: typ, Time: time.Date(2026, 11, 1, 10, 0, i, 0, time.UTC),
			Detail: jobevent.Detail{EventID: id, JobID: fmt.Sprintf("job-%d", i), TenantID: "acme", Status: "succeeded", Result: json.RawMessage(`{"ok":true}`)}})
	}
	return out
}

func TestEventBridgePublishesInBatchesOfTen(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client := eventbridge.NewFromConfig(awsenv.Static(""), func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	p := EventBridge{Client: client, Bus: "fleetq-dev"}
	if err := p.Publish(context.Background(), events(23, "Job Succeeded")); err != nil {
		t.Fatal(err)
	}
	if fake.calls != 3 || len(fake.entries) != 23 {
		t.Fatalf("%d calls carrying %d entries, want 3 calls (10+10+3) and 23 entries", fake.calls, len(fake.entries))
	}
	e := fake.entries[0]
	if e["Source"] != Source || e["EventBusName"] != "fleetq-dev" || e["DetailType"] != "Job Succeeded" {
		t.Fatalf("entry %v", e)
	}
	var d jobevent.Detail
	if err := json.Unmarshal([]byte(e["Detail"].(string)), &d); err != nil || d.EventID != "job-0@1" || string(d.Result) != `{"ok":true}` {
		t.Fatalf("detail %v: %+v", err, d)
	}
}

func TestEventBridgeRefusedEntryFailsThePublish(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{refuse: map[string]bool{"Job Dead": true}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client := eventbridge.NewFromConfig(awsenv.Static(""), func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	evs := append(events(2, "Job Succeeded"), events(1, "Job Dead")...)
	err := EventBridge{Client: client, Bus: "b"}.Publish(context.Background(), evs)
	if err == nil || !strings.Contains(err.Error(), "InternalFailure") {
		t.Fatalf("err = %v, want the refusal reported so the outbox keeps the events", err)
	}
}

func TestBusKeepsTheNewest(t *testing.T) {
	t.Parallel()
	b := &Bus{Keep: 5}
	if err := b.Publish(context.Background(), events(8, "Job Succeeded")); err != nil {
		t.Fatal(err)
	}
	got := b.Recent(0)
	if len(got) != 5 || got[0].Detail.JobID != "job-3" || got[4].Detail.JobID != "job-7" {
		t.Fatalf("kept %d events from %s", len(got), got[0].Detail.JobID)
	}
	if r := b.Recent(2); len(r) != 2 || r[1].Detail.JobID != "job-7" || r[0].Source != Source {
		t.Fatalf("Recent(2) = %+v", r)
	}
}

// drainCounter is an outbox that is always empty and tells each drain.
type drainCounter struct{ drains chan struct{} }

func (d drainCounter) RelayJob(context.Context, jobevent.Publisher, string) (int, error) {
	return 0, nil
}
func (d drainCounter) RelayOutbox(context.Context, jobevent.Publisher, int) (int, error) {
	d.drains <- struct{}{}
	return 0, nil
}

// Run drains once per interval of its clock, and stops with ctx.
func TestRelayRunDrainsOnItsClock(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	out := drainCounter{drains: make(chan struct{})}
	r, err := NewRelay(out, &Bus{}, clk, slog.New(slog.DiscardHandler), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.Run(ctx, time.Minute) }()
	wait, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	if err := clk.BlockUntil(wait, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute - time.Millisecond)
	select {
	case <-out.drains:
		t.Fatal("drained before the interval was over")
	default:
	}
	for i := 0; i < 2; i++ {
		clk.Advance(time.Minute)
		select {
		case <-out.drains:
		case <-wait.Done():
			t.Fatalf("drain %d did not come", i+1)
		}
	}
	cancel()
	select {
	case <-stopped:
	case <-wait.Done():
		t.Fatal("Run did not return when ctx ended")
	}
}

func TestNewRelayRequiresEveryDependency(t *testing.T) {
	out, bus, log := drainCounter{}, &Bus{}, slog.New(slog.DiscardHandler)
	for name, f := range map[string]func() (*Relay, error){
		"outbox":    func() (*Relay, error) { return NewRelay(nil, bus, clock.Real{}, log, Config{}) },
		"publisher": func() (*Relay, error) { return NewRelay(out, nil, clock.Real{}, log, Config{}) },
		"clock":     func() (*Relay, error) { return NewRelay(out, bus, nil, log, Config{}) },
		"logger":    func() (*Relay, error) { return NewRelay(out, bus, clock.Real{}, nil, Config{}) },
	} {
		if r, err := f(); err == nil || r != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("NewRelay without a %s: %v, %v", name, r, err)
		}
	}
	if r, err := NewRelay(out, bus, clock.Real{}, log, Config{}); err != nil || r == nil || r.Callbacks() != nil {
		t.Fatalf("NewRelay with every dependency: %v, %v", r, err)
	}
}
