package infra_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	samples "github.com/fleetq/fleetq/events"
)

// The SQS sample comes from the queue the dev stack's dispatch function is
// triggered by, so that replaying it is what the stage would deliver.
func TestSQSSampleComesFromTheDispatchQueue(t *testing.T) {
	s := synth(t, "dev")
	var source string
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		arn, _ := m["EventSourceArn"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(arn) == 2 {
			id, _ := arn[0].(string)
			q, ok := s.resources("AWS::SQS::Queue")[id]
			if !ok {
				t.Fatalf("dispatch's event source %s is not a queue of the stack", id)
			}
			source, _ = q["QueueName"].(string)
		}
	}
	if source == "" {
		t.Fatal("no SQS event source in the dev stack")
	}
	b, err := samples.FS.ReadFile("sqs-submission-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var batch events.SQSEvent
	if err := json.Unmarshal(b, &batch); err != nil || len(batch.Records) == 0 {
		t.Fatalf("sqs-submission-batch.json: %v (%d records)", err, len(batch.Records))
	}
	for _, r := range batch.Records {
		if name := r.EventSourceARN[strings.LastIndex(r.EventSourceARN, ":")+1:]; name != source {
			t.Errorf("record %s comes from queue %q; the dev stack's dispatch reads %q", r.MessageId, name, source)
		}
	}
}
