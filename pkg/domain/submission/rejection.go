package submission

import "time"

// Rejection is a submission that can never become a job (malformed, unknown
// workflow). It is kept for operators instead of being retried forever.
type Rejection struct {
	MessageID string    `dynamodbav:"message_id" json:"message_id"`
	Source    string    `dynamodbav:"source" json:"source"`
	Reason    string    `dynamodbav:"reason" json:"reason"`
	Body      string    `dynamodbav:"body" json:"body"`
	At        time.Time `dynamodbav:"at" json:"at"`
}
