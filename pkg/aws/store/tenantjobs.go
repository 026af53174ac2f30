package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// tenantPagePartitions is the most IndexByState partitions one page of a
// tenant's listing reads, so that a page costs at most this many queries.
const tenantPagePartitions = 8

// listOrder is the order in which a listing of every status walks them.
var listOrder = []job.Status{job.Accepted, job.Queued, job.Leased, job.Succeeded, job.Dead, job.Canceled}

// tenantCursor is where a tenant's listing resumes: the status it lists
// ("" for every status) and the partitions still to read, each from after
// the index entry it stopped at (none: from its start). It travels to the
// producer as opaque base64url JSON.
type tenantCursor struct {
	Status  string        `json:"s"`
	Pending []partitionAt `json:"p"`
}

type partitionAt struct {
	Partition string `json:"k"`
	SortKey   string `json:"sk,omitempty"`
	JobID     string `json:"id,omitempty"`
}

// ListTenantJobs lists one page of a tenant's jobs in one status (every
// status for ""), in the given fleets. There is no index by tenant: it
// reads the fleets' IndexByState partitions of the status, newest entry
// first, keeping the tenant's jobs (a filter, applied after the read). One
// page reads at most tenantPagePartitions partitions and at most limit
// index entries in all, whoever's they are, so a page costs what a page of
// the index costs; it may hold fewer than limit jobs (none, even) and
// still answer a cursor, when other tenants' entries filled the read. The
// page is sorted newest change first. cursor is "" for the first page or
// the one the previous page answered; next is "" after the last page. A
// cursor that this store did not answer for this status is
// fault.ErrBadCursor.
func (s *Store) ListTenantJobs(ctx context.Context, tenantID string, fleets []string, status job.Status, limit int, cursor string) (page []job.Summary, next string, err error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("list jobs of tenant %s: limit %d", tenantID, limit)
	}
	all := s.listPartitions(fleets, status)
	var c tenantCursor
	if cursor == "" {
		c.Status = string(status)
		for _, p := range all {
			c.Pending = append(c.Pending, partitionAt{Partition: p})
		}
	} else if c, err = decodeTenantCursor(cursor, status, all); err != nil {
		return nil, "", err
	}
	k := min(len(c.Pending), limit, tenantPagePartitions)
	if k == 0 {
		return []job.Summary{}, "", nil
	}
	per := limit / k
	type read struct {
		items []jobItem
		last  map[string]types.AttributeValue
	}
	got, err := eachShard(c.Pending[:k], func(p partitionAt) (read, error) {
		items, last, err := s.tenantEntries(ctx, tenantID, p, per)
		return read{items, last}, err
	})
	if err != nil {
		return nil, "", err
	}
	rest := slices.Clone(c.Pending[k:])
	var left []partitionAt
	page = []job.Summary{}
	for i, g := range got {
		for _, it := range g.items {
			page = append(page, it.summary())
		}
		if at, ok := resumeAt(c.Pending[i].Partition, g.last); ok {
			left = append(left, at)
		}
	}
	slices.SortStableFunc(page, func(a, b job.Summary) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	c.Pending = append(left, rest...)
	if len(c.Pending) == 0 {
		return page, "", nil
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, "", err
	}
	return page, base64.RawURLEncoding.EncodeToString(raw), nil
}

// tenantEntries reads one page of up to limit entries of a partition,
// newest first, from after p's position, and keeps the tenant's.
func (s *Store) tenantEntries(ctx context.Context, tenantID string, p partitionAt, limit int) ([]jobItem, map[string]types.AttributeValue, error) {
	// The tenant is kept here rather than by a FilterExpression: DynamoDB
	// bills what a query reads, filtered or not, and the embedded server
	// counts a filter's drops of other partitions against the Limit.
	e, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(AttrGSI1PK).Equal(expression.Value(p.Partition))).Build()
	if err != nil {
		return nil, nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(IndexByState),
		KeyConditionExpression:   e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(limit)),
	}
	if p.SortKey != "" {
		pk, sk := jobKey(p.JobID)
		start := key(pk, sk)
		start[AttrGSI1PK] = &types.AttributeValueMemberS{Value: p.Partition}
		start[AttrGSI1SK] = &types.AttributeValueMemberS{Value: p.SortKey}
		in.ExclusiveStartKey = start
	}
	res, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, nil, fmt.Errorf("query %s for tenant %s: %w", p.Partition, tenantID, err)
	}
	var items []jobItem
	if err := attributevalue.UnmarshalListOfMaps(res.Items, &items); err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", p.Partition, err)
	}
	return slices.DeleteFunc(items, func(it jobItem) bool { return it.TenantID != tenantID }), res.LastEvaluatedKey, nil
}

// resumeAt is where a partition's read goes on after a page that stopped
// at last; false when the page read the partition to its end.
func resumeAt(partition string, last map[string]types.AttributeValue) (partitionAt, bool) {
	if len(last) == 0 {
		return partitionAt{}, false
	}
	str := func(name string) string {
		if v, ok := last[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	return partitionAt{Partition: partition, SortKey: str(AttrGSI1SK), JobID: strings.TrimPrefix(str(AttrPK), prefixJob)}, true
}

// listPartitions are the IndexByState partitions holding the fleets' jobs
// in status (every status for ""), in the order a listing reads them.
func (s *Store) listPartitions(fleets []string, status job.Status) []string {
	statuses := listOrder
	if status != "" {
		statuses = []job.Status{status}
	}
	var out []string
	for _, st := range statuses {
		for _, f := range fleets {
			switch st {
			case job.Accepted:
				out = append(out, s.shardPartitions(prefixAccepted, f)...)
			case job.Queued:
				out = append(append(out, s.readyPartitions(f)...), delayedPartition(f))
			case job.Leased:
				out = append(out, s.shardPartitions(prefixLeased, f)...)
			default:
				out = append(out, s.terminalPartitions(f, st)...)
			}
		}
	}
	return out
}

// decodeTenantCursor reads a cursor ListTenantJobs answered for status:
// its partitions must be among the listing's, each named once.
func decodeTenantCursor(cursor string, status job.Status, partitions []string) (tenantCursor, error) {
	bad := func(why string) (tenantCursor, error) {
		return tenantCursor{}, fmt.Errorf("cursor %s: %w", why, fault.ErrBadCursor)
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return bad("is not one this listing answered")
	}
	var c tenantCursor
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || len(c.Pending) == 0 {
		return bad("is not one this listing answered")
	}
	if c.Status != string(status) {
		return bad(fmt.Sprintf("was answered for status %q, not %q", c.Status, status))
	}
	seen := map[string]bool{}
	for _, p := range c.Pending {
		switch {
		case !slices.Contains(partitions, p.Partition) || seen[p.Partition]:
			return bad("is not one this listing answered")
		case (p.SortKey == "") != (p.JobID == ""):
			return bad("is not one this listing answered")
		}
		seen[p.Partition] = true
	}
	return c, nil
}

// summary is a listed job as the index holds it.
func (it jobItem) summary() job.Summary {
	return job.Summary{
		ID: it.JobID, TenantID: it.TenantID, WorkflowID: it.WorkflowID, Fleet: it.Fleet, Status: job.Status(it.Status),
		Priority: it.Priority, Attempts: it.Attempts, MaxAttempts: it.MaxAttempts, Preemptions: it.Preemptions,
		WorkerID: it.WorkerID, Reason: job.Reason(it.Reason), ErrorCode: it.ErrorCode,
		CreatedAt: fromMS(it.CreatedMS), UpdatedAt: fromMS(it.UpdatedMS),
	}
}
