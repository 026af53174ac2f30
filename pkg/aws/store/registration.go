package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TakeRegistrationSlot counts one registration attempt from a source address
// in the current one-minute window, refusing past limit. The counter lives in
// the table, so the limit holds across every API instance; windows expire by TTL.
func (s *Store) TakeRegistrationSlot(ctx context.Context, source string, limit int) (retryAfter time.Duration, err error) {
	now := s.clock.Now()
	window := now.Truncate(time.Minute)
	end := window.Add(time.Minute)
	count := expression.Name(attrCount)
	pk, sk := rateWindowKey(source, window)
	err = s.updateItem(ctx, update{
		pk: pk, sk: sk,
		set: expression.Add(count, expression.Value(1)).
			Set(expression.Name(AttrTTL), expression.Value(end.Add(time.Minute).Unix())),
		cond: expression.Or(count.AttributeNotExists(), count.LessThan(expression.Value(limit))),
	})
	if errors.Is(err, errConditionFailed) {
		wait := end.Sub(now)
		if wait < time.Second {
			wait = time.Second
		}
		return wait, ErrRateLimited
	}
	return 0, err
}

// rejectionRetention is how long rejected submissions are kept.
const rejectionRetention = 14 * 24 * time.Hour

// maxRejectedBody bounds the copy of a rejected body kept for operators.
const maxRejectedBody = 4096

// RecordRejection stores a rejected submission (idempotent per message id).
func (s *Store) RecordRejection(ctx context.Context, r Rejection) error {
	if r.At.IsZero() {
		r.At = s.clock.Now()
	}
	if len(r.Body) > maxRejectedBody {
		r.Body = r.Body[:maxRejectedBody] + "…"
	}
	av, err := attributevalue.MarshalMap(r)
	if err != nil {
		return fmt.Errorf("encode rejection: %w", err)
	}
	pk, sk := rejectionKey(r.At, r.MessageID)
	av[AttrPK] = &types.AttributeValueMemberS{Value: pk}
	av[AttrSK] = &types.AttributeValueMemberS{Value: sk}
	av[AttrTTL] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.At.Add(rejectionRetention).Unix(), 10)}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return fmt.Errorf("record rejection of %s: %w", r.MessageID, err)
	}
	return nil
}

// ListRejections returns the newest rejected submissions.
func (s *Store) ListRejections(ctx context.Context, limit int) ([]Rejection, error) {
	q := byPartition(partitionRejected)
	q.backward, q.limit = true, limit
	return queryItems[Rejection](ctx, s, q)
}
