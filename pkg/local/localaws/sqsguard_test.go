package localaws_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func sharedSQS(t *testing.T) *sqs.Client {
	t.Helper()
	srv, err := localaws.SharedSQS("")
	if err != nil {
		t.Fatal(err)
	}
	return localaws.SQSClient(srv.URL)
}

func createQueue(t *testing.T, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// Queues are created and deleted while other queues are sent to and
// received from, as the stacks of tests running in parallel do: the SQS
// emulation reads its map of queues without a lock, so without the guard
// this ends the process (concurrent map read and write) or fails under
// the race detector.
func TestSQSQueuesComeAndGoWhileOthersAreUsed(t *testing.T) {
	t.Parallel()
	c := sharedSQS(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		url := createQueue(t, c, fmt.Sprintf("guard-used-%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("m")}); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
				if err != nil {
					t.Errorf("receive: %v", err)
					return
				}
				for _, m := range out.Messages {
					if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Errorf("delete message: %v", err)
					}
				}
			}
		}()
	}
	for i := 0; i < 40; i++ {
		url := createQueue(t, c, fmt.Sprintf("guard-new-%d", i))
		if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Fatalf("delete queue: %v", err)
		}
	}
	wg.Wait()
}

// A receive that waits for a message does not keep queues from being
// created meanwhile, and still gets a message sent while it waits.
func TestSQSWaitingReceiveLetsQueuesBeCreated(t *testing.T) {
	t.Parallel()
	c := sharedSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "guard-waiting")
	got := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		// The longest wait SQS allows: were the receive to hold the
		// others out while it waits, the queue below would be created
		// only after it answered, empty.
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		if err != nil {
			t.Errorf("receive: %v", err)
		}
		got <- out
	}()
	createQueue(t, c, "guard-created-while-waiting")
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("after")}); err != nil {
		t.Fatal(err)
	}
	out := <-got
	if out == nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "after" {
		t.Fatalf("the waiting receive answered %+v, want the message sent while it waited", out)
	}
}
