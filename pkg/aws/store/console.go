package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Operator console sessions (pkg/service/console) keep three kinds of item:
// a used login nonce (PK CONSOLE#LOGIN#<nonce>, until the login would have
// expired), an ended session (PK CONSOLE#SESSION#<id>, until the session
// would have expired), and each operator's session epoch (PK
// CONSOLE#OPERATOR#<operator>), which "sign out everywhere" raises: a
// session signed at a lower epoch is over. The first two expire by TTL; the
// epoch is kept.

// UseConsoleLogin marks a login nonce used, once: a second use, by this
// process or another, answers ErrLoginUsed. expires is when the login stops
// being valid anyway; the marker is kept until then.
func (s *Store) UseConsoleLogin(ctx context.Context, nonce string, expires time.Time) error {
	if nonce == "" {
		return fmt.Errorf("use console login: %w", ErrLoginUsed)
	}
	pk, sk := consoleLoginKey(nonce)
	err := s.putIfAbsent(ctx, map[string]any{AttrPK: pk, AttrSK: sk, AttrTTL: expires.Add(time.Minute).Unix()})
	if isConditionFailed(err) {
		return ErrLoginUsed
	}
	if err != nil {
		return fmt.Errorf("use console login: %w", err)
	}
	return nil
}

// EndConsoleSession ends one session (sign-out): ConsoleSessionEnded answers
// true for it from now on. expires is when the session would have ended.
func (s *Store) EndConsoleSession(ctx context.Context, id string, expires time.Time) error {
	pk, sk := consoleSessionKey(id)
	av, err := attributevalue.MarshalMap(map[string]any{AttrPK: pk, AttrSK: sk, AttrTTL: expires.Add(time.Minute).Unix()})
	if err != nil {
		return err
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return fmt.Errorf("end console session: %w", err)
	}
	return nil
}

// ConsoleSessionEnded says whether a session was signed out (a strongly
// consistent read: a sign-out is seen by every API process at once).
func (s *Store) ConsoleSessionEnded(ctx context.Context, id string) (bool, error) {
	pk, sk := consoleSessionKey(id)
	var it struct{}
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil {
		return false, fmt.Errorf("console session: %w", err)
	}
	return found, nil
}

// ConsoleEpoch is an operator's session epoch (0 until the first "sign out
// everywhere").
func (s *Store) ConsoleEpoch(ctx context.Context, operator string) (int64, error) {
	pk, sk := consoleOperatorKey(operator)
	var it struct {
		Epoch int64 `dynamodbav:"epoch"`
	}
	if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
		return 0, fmt.Errorf("console epoch: %w", err)
	}
	return it.Epoch, nil
}

// EndConsoleSessions ends every session of an operator ("sign out
// everywhere") by raising its epoch, and answers the new epoch.
func (s *Store) EndConsoleSessions(ctx context.Context, operator string) (int64, error) {
	pk, sk := consoleOperatorKey(operator)
	e, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name(attrEpoch), expression.Value(1))).Build()
	if err != nil {
		return 0, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(pk, sk), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ReturnValues: "UPDATED_NEW",
	})
	if err != nil {
		return 0, fmt.Errorf("end console sessions: %w", err)
	}
	var it struct {
		Epoch int64 `dynamodbav:"epoch"`
	}
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return 0, fmt.Errorf("end console sessions: %w", err)
	}
	return it.Epoch, nil
}

// putIfAbsent puts an item unless one with its key exists (errConditionFailed).
func (s *Store) putIfAbsent(ctx context.Context, item map[string]any) error {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
	if isConditionFailed(err) {
		return errConditionFailed
	}
	return err
}
