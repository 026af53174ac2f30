package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type principalItem struct {
	PK   string `dynamodbav:"PK"`
	SK   string `dynamodbav:"SK"`
	Type string `dynamodbav:"type"`
	Principal
}

// MapPrincipal stores a principal's mapping. Mapping it again to the same
// tenant changes nothing; to another, it is a *PrincipalMappedError.
func (s *Store) MapPrincipal(ctx context.Context, p Principal) (Principal, error) {
	pk, sk := principalKey(p.Key)
	av, err := attributevalue.MarshalMap(principalItem{PK: pk, SK: sk, Type: typePrincipal, Principal: p})
	if err != nil {
		return Principal{}, fmt.Errorf("encode principal: %w", err)
	}
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return Principal{}, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err == nil {
		return p, nil
	}
	if !isConditionFailed(err) {
		return Principal{}, fmt.Errorf("map principal %s: %w", p.ARN, err)
	}
	existing, found, err := s.GetPrincipal(ctx, p.Key)
	switch {
	case err != nil:
		return Principal{}, err
	case !found:
		return Principal{}, fmt.Errorf("map principal %s: %w", p.ARN, ErrContention)
	case existing.Same(p):
		return existing, nil
	default:
		return Principal{}, &PrincipalMappedError{Existing: existing}
	}
}

// GetPrincipal reads a principal's mapping by its key (strongly
// consistent, so a removal holds at once).
func (s *Store) GetPrincipal(ctx context.Context, key string) (Principal, bool, error) {
	pk, sk := principalKey(key)
	var it principalItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil || !found {
		return Principal{}, false, err
	}
	return it.Principal, true, nil
}

// ListPrincipals lists every mapped principal.
func (s *Store) ListPrincipals(ctx context.Context) ([]Principal, error) {
	q := byPartition(partitionPrincipals)
	q.consistent = true
	items, err := queryItems[principalItem](ctx, s, q)
	if err != nil {
		return nil, err
	}
	out := make([]Principal, 0, len(items))
	for _, it := range items {
		out = append(out, it.Principal)
	}
	return out, nil
}

// UnmapPrincipal removes a principal's mapping and answers what it was;
// a principal the table does not map is ErrNotFound.
func (s *Store) UnmapPrincipal(ctx context.Context, principal string) (Principal, error) {
	pk, sk := principalKey(principal)
	res, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk),
		ReturnValues: types.ReturnValueAllOld})
	if err != nil {
		return Principal{}, fmt.Errorf("unmap principal %s: %w", principal, err)
	}
	if len(res.Attributes) == 0 {
		return Principal{}, fmt.Errorf("principal %s: %w", principal, ErrNotFound)
	}
	var it principalItem
	if err := attributevalue.UnmarshalMap(res.Attributes, &it); err != nil {
		return Principal{}, fmt.Errorf("decode principal %s: %w", principal, err)
	}
	return it.Principal, nil
}
