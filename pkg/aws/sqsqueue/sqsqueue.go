package sqsqueue

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Sender is the part of the SQS API the queue uses.
type Sender interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue is the submission queue.
type Queue struct {
	Client Sender
	URL    string
}

// Enqueue sends one submission body.
func (q Queue) Enqueue(ctx context.Context, body []byte) error {
	_, err := q.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(body))})
	if err != nil {
		return fmt.Errorf("send to submission queue: %w", err)
	}
	return nil
}
