package devstack

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// SQSAPI is the part of SQS the event source mapping uses.
type SQSAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// BatchHandler is an SQS-triggered function.
type BatchHandler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// EventSourceMapping does locally what Lambda's SQS event source mapping does
// in AWS: it receives batches (up to BatchSize, waiting at most Window to
// fill one), invokes the handler with an events.SQSEvent, deletes the records
// that succeeded, leaves the reported failures to reappear after the
// visibility timeout, and moves a message that has been received MaxReceives
// times to the dead-letter queue (the queue's redrive policy in AWS).
type EventSourceMapping struct {
	Client            SQSAPI
	QueueURL          string
	QueueARN          string
	DLQURL            string
	BatchSize         int
	Window            time.Duration
	VisibilityTimeout time.Duration
	MaxReceives       int
	Handler           BatchHandler
	Logger            *slog.Logger
	// Clock times the batching window and the pauses between receives
	// (default: the wall clock; SQS's own long poll waits in real time).
	Clock clock.Clock
	// Invoked, when set, is called after each invocation of Handler,
	// whatever its outcome (Stack.Dispatched).
	Invoked func()

	mu       sync.Mutex
	receives map[string]int // message id → receives seen
}

// Run polls until ctx is done.
func (m *EventSourceMapping) Run(ctx context.Context) {
	for ctx.Err() == nil {
		m.RunOnce(ctx)
	}
}

// RunOnce receives one batch, if any message is waiting, and hands it to
// the handler. It answers how many messages the batch held.
func (m *EventSourceMapping) RunOnce(ctx context.Context) int {
	m.mu.Lock()
	if m.receives == nil {
		m.receives = map[string]int{}
	}
	if m.Clock == nil {
		m.Clock = clock.Real{}
	}
	m.mu.Unlock()
	batch := m.collect(ctx)
	if len(batch) == 0 {
		return 0
	}
	m.invoke(ctx, batch)
	if m.Invoked != nil {
		m.Invoked()
	}
	return len(batch)
}

func (m *EventSourceMapping) collect(ctx context.Context) []sqstypes.Message {
	var batch []sqstypes.Message
	deadline := m.Clock.Now().Add(m.Window)
	for len(batch) < m.BatchSize && ctx.Err() == nil {
		wait := int32(1)
		if len(batch) > 0 {
			if m.Clock.Now().After(deadline) {
				break
			}
			wait = 0
		}
		out, err := m.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(m.QueueURL),
			MaxNumberOfMessages: int32(min(10, m.BatchSize-len(batch))),
			WaitTimeSeconds:     wait,
			VisibilityTimeout:   int32(m.VisibilityTimeout / time.Second),
		})
		if err != nil {
			if ctx.Err() == nil {
				m.Logger.Warn("receive from submission queue", "error", err.Error())
				sleep(ctx, m.Clock, time.Second)
			}
			return batch
		}
		if len(out.Messages) == 0 {
			if len(batch) > 0 {
				sleep(ctx, m.Clock, 50*time.Millisecond)
			}
			if len(batch) == 0 {
				return nil
			}
			continue
		}
		batch = append(batch, out.Messages...)
	}
	return batch
}

func (m *EventSourceMapping) invoke(ctx context.Context, batch []sqstypes.Message) {
	ev := events.SQSEvent{}
	byID := map[string]sqstypes.Message{}
	for _, msg := range batch {
		id := aws.ToString(msg.MessageId)
		m.mu.Lock()
		m.receives[id]++
		n := m.receives[id]
		m.mu.Unlock()
		if m.MaxReceives > 0 && n > m.MaxReceives {
			m.redrive(ctx, msg)
			continue
		}
		byID[id] = msg
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: id, ReceiptHandle: aws.ToString(msg.ReceiptHandle), Body: aws.ToString(msg.Body),
			Attributes:  map[string]string{"ApproximateReceiveCount": strconv.Itoa(n)},
			EventSource: "aws:sqs", EventSourceARN: m.QueueARN, AWSRegion: "us-east-1",
		})
	}
	if len(ev.Records) == 0 {
		return
	}
	resp, err := m.Handler(ctx, ev)
	failed := map[string]bool{}
	if err != nil {
		// A function error fails the whole batch, as in AWS.
		m.Logger.Error("dispatch invocation failed", "error", err.Error(), "records", len(ev.Records))
		return
	}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for id, msg := range byID {
		if failed[id] {
			continue
		}
		m.delete(ctx, msg)
		m.mu.Lock()
		delete(m.receives, id)
		m.mu.Unlock()
	}
}

func (m *EventSourceMapping) redrive(ctx context.Context, msg sqstypes.Message) {
	id := aws.ToString(msg.MessageId)
	if _, err := m.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.DLQURL), MessageBody: msg.Body}); err != nil {
		m.Logger.Error("move message to the dead-letter queue", "message_id", id, "error", err.Error())
		return
	}
	m.delete(ctx, msg)
	m.mu.Lock()
	delete(m.receives, id)
	m.mu.Unlock()
	m.Logger.Warn("message moved to the dead-letter queue", "message_id", id, "receives", m.MaxReceives)
}

func (m *EventSourceMapping) delete(ctx context.Context, msg sqstypes.Message) {
	_, err := m.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(m.QueueURL), ReceiptHandle: msg.ReceiptHandle})
	if err != nil && !errors.Is(err, context.Canceled) {
		m.Logger.Warn("delete message", "message_id", aws.ToString(msg.MessageId), "error", err.Error())
	}
}

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	}
}
