// Package sqsqueue puts job submissions on the SQS submission queue.
package sqsqueue
