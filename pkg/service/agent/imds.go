package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Metadata reads the EC2 instance metadata service (IMDSv2 only: the
// session token is required, never the v1 fallback).
type Metadata struct {
	c *imds.Client
}

// NewMetadata returns a metadata reader; endpoint "" is EC2's own. opts
// change the client's options after these (a test's stand-in on loopback
// drops the client's timeouts, made for the instance's own service).
func NewMetadata(endpoint string, opts ...func(*imds.Options)) *Metadata {
	return &Metadata{c: imds.New(imds.Options{
		Endpoint:       endpoint,
		EnableFallback: aws.FalseTernary,
		Retryer:        aws.NopRetryer{},
	}, opts...)}
}

// get reads one path; ok is false when the path does not exist (404).
func (m *Metadata) get(ctx context.Context, path string) (value string, ok bool, err error) {
	out, err := m.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var st interface{ HTTPStatusCode() int }
		if errors.As(err, &st) && st.HTTPStatusCode() == http.StatusNotFound {
			return "", false, nil
		}
		return "", false, fmt.Errorf("instance metadata %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, 64<<10))
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(b)), true, nil
}

// Identity is what the worker registers with.
type Identity struct {
	InstanceID, InstanceType, AZ string
	// PurchaseOption is "spot" or "on-demand", from instance-life-cycle
	// ("" when the metadata does not say).
	PurchaseOption string
	// LaunchedAt is when the instance last entered pending: its launch,
	// or its start from a warm pool (the identity document's pendingTime;
	// zero when the metadata does not say).
	LaunchedAt time.Time
	// ImageID is the instance's AMI (the identity document's imageId;
	// empty when the metadata does not say).
	ImageID string
}

// Identity reads the instance's id, type and availability zone.
func (m *Metadata) Identity(ctx context.Context) (Identity, error) {
	var id Identity
	for _, f := range []struct {
		path string
		into *string
	}{
		{"instance-id", &id.InstanceID},
		{"instance-type", &id.InstanceType},
		{"placement/availability-zone", &id.AZ},
	} {
		v, _, err := m.get(ctx, f.path)
		if err != nil {
			return id, err
		}
		*f.into = v
	}
	// instance-life-cycle is "spot", "on-demand" or "scheduled"; older
	// metadata services lack it, which leaves the option unknown.
	if v, ok, err := m.get(ctx, "instance-life-cycle"); err == nil && ok {
		switch v {
		case "spot":
			id.PurchaseOption = "spot"
		case "on-demand", "scheduled":
			id.PurchaseOption = "on-demand"
		}
	}
	if doc, err := m.c.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{}); err == nil {
		id.LaunchedAt, id.ImageID = doc.PendingTime, doc.ImageID
	}
	return id, nil
}

// TargetLifecycleState answers the lifecycle state Auto Scaling is moving
// the instance to (autoscaling/target-lifecycle-state): InService, or one
// of the Warmed: states while the instance is being prepared for a warm
// pool; ok is false when the metadata does not say (not in a group).
func (m *Metadata) TargetLifecycleState(ctx context.Context) (state string, ok bool, err error) {
	return m.get(ctx, "autoscaling/target-lifecycle-state")
}

// SpotNotice answers whether a Spot interruption is scheduled
// (spot/instance-action exists: terminate, stop or hibernate).
func (m *Metadata) SpotNotice(ctx context.Context) (bool, error) {
	_, ok, err := m.get(ctx, "spot/instance-action")
	return ok, err
}

// Rebalance answers whether EC2 recommends rebalancing this instance
// (events/recommendations/rebalance exists).
func (m *Metadata) Rebalance(ctx context.Context) (bool, error) {
	_, ok, err := m.get(ctx, "events/recommendations/rebalance")
	return ok, err
}
