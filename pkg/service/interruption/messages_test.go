package interruption_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	samples "github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/service/interruption"
)

// Every parser against the sample of its detail type in events/.
func TestParseSamples(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		want interruption.Message
		kind interruption.Kind
	}{
		{"ec2-spot-interruption-warning.json",
			interruption.SpotInterruptionWarning{Instance: instance, Action: "terminate"}, interruption.KindSpotWarning},
		{"ec2-rebalance-recommendation.json",
			interruption.RebalanceRecommendation{Instance: instance}, interruption.KindRebalance},
		{"ec2-instance-state-change-terminated.json",
			interruption.InstanceStateChange{Instance: instance, State: "terminated"}, interruption.KindInstanceEnding},
		{"asg-instance-terminate-lifecycle-action.json",
			interruption.TerminateLifecycleAction{Instance: instance, Group: "fleetq-dev-demo", Hook: "fleetq-drain", Token: hookToken,
				Transition: "autoscaling:EC2_INSTANCE_TERMINATING"}, interruption.KindTerminateAction},
		{"ec2-instance-state-change-stopping.json",
			interruption.InstanceStateChange{Instance: instance, State: "stopping"}, interruption.KindInstanceStopping},
		{"ec2-instance-state-change-stopped.json",
			interruption.InstanceStateChange{Instance: instance, State: "stopped"}, interruption.KindInstanceEnding},
		{"ec2-capacity-reservation-interruption-warning.json",
			interruption.ReservationInterruptionWarning{Instance: instance, Action: "terminate", TerminationTime: "2026-11-22T10:20:00Z"},
			interruption.KindReservationWarning},
	} {
		m, err := interruption.Parse(sample(t, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if m != c.want || m.Kind() != c.kind || m.InstanceID() != instance {
			t.Errorf("%s: %#v (kind %s, instance %s), want %#v (kind %s)", c.file, m, m.Kind(), m.InstanceID(), c.want, c.kind)
		}
	}
}

// Every EC2 and Auto Scaling sample in events/ is one the handler parses,
// and every detail type it handles has a sample.
func TestEverySampleParsesAndEveryDetailTypeHasOne(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(samples.FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, name := range names {
		b, _ := samples.FS.ReadFile(name)
		var ev events.CloudWatchEvent
		if json.Unmarshal(b, &ev) != nil || (ev.Source != interruption.SourceEC2 && ev.Source != interruption.SourceAutoScaling &&
			ev.Source != interruption.SourceHealth) {
			continue
		}
		if _, err := interruption.Parse(ev); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		seen[ev.DetailType] = true
	}
	for _, h := range interruption.HandledEvents() {
		// The same warning under the name another page of the EC2 guide
		// gives it: the same parser reads it (TestParseSamples).
		if h.DetailType == interruption.ReservationWarningAlt {
			continue
		}
		if dt := h.DetailType; !seen[dt] {
			t.Errorf("no sample of %q in events/", dt)
		}
	}
}

func TestStateChangeKinds(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]interruption.Kind{
		"shutting-down": interruption.KindInstanceEnding, "terminated": interruption.KindInstanceEnding,
		"pending": interruption.KindInstanceState, "running": interruption.KindInstanceState,
		"stopping": interruption.KindInstanceStopping, "stopped": interruption.KindInstanceEnding,
	} {
		ev := sample(t, "ec2-instance-state-change-terminated.json")
		ev.Detail = json.RawMessage(`{"instance-id":"i-1","state":"` + state + `"}`)
		m, err := interruption.Parse(ev)
		if err != nil || m.Kind() != want || m.InstanceID() != "i-1" {
			t.Errorf("%s: %v, %v: want kind %s", state, m, err, want)
		}
	}
}

// Fields the services add later, and ones the handler does not use, are
// ignored.
func TestParseIgnoresExtraFields(t *testing.T) {
	t.Parallel()
	ev := sample(t, "asg-instance-terminate-lifecycle-action.json")
	ev.Detail = json.RawMessage(strings.Replace(string(ev.Detail), `"Origin"`, `"NotificationMetadata":"x","Future":{"a":[1]},"Origin"`, 1))
	m, err := interruption.Parse(ev)
	if err != nil || m.(interruption.TerminateLifecycleAction).Token != hookToken {
		t.Fatalf("%#v, %v", m, err)
	}
	ev = sample(t, "ec2-spot-interruption-warning.json")
	ev.Detail = json.RawMessage(`{"instance-id":"i-1"}`) // instance-action is not needed
	if m, err := interruption.Parse(ev); err != nil || m.InstanceID() != "i-1" {
		t.Fatalf("%#v, %v", m, err)
	}
	if _, err := interruption.Parse(events.CloudWatchEvent{Source: "aws.events", DetailType: "Scheduled Event"}); !errors.Is(err, interruption.ErrUnsupported) {
		t.Fatalf("scheduled event: %v", err)
	}
}

func TestParseHealthScheduledChange(t *testing.T) {
	t.Parallel()
	m, err := interruption.Parse(sample(t, "aws-health-scheduled-change.json"))
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := m.(interruption.ScheduledChange)
	if !ok || sc.Kind() != interruption.KindScheduledChange || sc.InstanceID() != instance || len(sc.Instances) != 1 ||
		sc.EventTypeCode != "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED" || sc.StartTime != "Sun, 29 Nov 2026 10:00:00 GMT" {
		t.Fatalf("%#v", m)
	}
	ev := sample(t, "aws-health-scheduled-change.json")
	ev.Detail = json.RawMessage(`{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"h-0123"},{"entityValue":"i-1"},{"entityValue":"i-2"}]}`)
	if m, err := interruption.Parse(ev); err != nil || len(m.(interruption.ScheduledChange).Instances) != 2 || m.InstanceID() != "i-1" {
		t.Fatalf("hosts are not instances: %#v, %v", m, err)
	}
	// A change to a Dedicated Host, or to no named entity, is about no
	// instance: its own kind, which the handler answers without an error.
	for _, detail := range []string{
		`{"service":"EC2","eventTypeCode":"AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"h-0123"}]}`,
		`{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[]}`,
		`{"service":"EC2","eventTypeCategory":"scheduledChange"}`,
	} {
		ev.Detail = json.RawMessage(detail)
		m, err := interruption.Parse(ev)
		if err != nil || m.Kind() != interruption.KindNoInstance || m.InstanceID() != "" {
			t.Errorf("%s: %#v, %v; want %s", detail, m, err, interruption.KindNoInstance)
		}
	}
	for detail, want := range map[string]error{
		`{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[{"entityValue":"i-1"}]}`:           interruption.ErrUnsupported,
		`{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"}]}`: interruption.ErrUnsupported,
		`{"eventTypeCategory":"scheduledChange"}`:                                                            interruption.ErrMalformed,
	} {
		ev.Detail = json.RawMessage(detail)
		if _, err := interruption.Parse(ev); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", detail, err, want)
		}
	}
}

func TestParseTestNotification(t *testing.T) {
	t.Parallel()
	m, err := interruption.Parse(sample(t, "asg-test-notification.json"))
	if err != nil || m.Kind() != interruption.KindTestNotification || m.(interruption.TestNotification).Group != "fleetq-dev-demo" {
		t.Fatalf("%#v, %v", m, err)
	}
	// Named in LifecycleTransition instead of Event.
	ev := sample(t, "asg-test-notification.json")
	ev.Detail = json.RawMessage(`{"AutoScalingGroupName":"g","LifecycleTransition":"autoscaling:TEST_NOTIFICATION"}`)
	if m, err := interruption.Parse(ev); err != nil || m.Kind() != interruption.KindTestNotification {
		t.Fatalf("%#v, %v", m, err)
	}
}
