package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// The headers of a delivery.
const (
	// HeaderEventID is the event's id, stable across redeliveries: a
	// receiver deduplicates by it.
	HeaderEventID = "Fleetq-Event-Id"
	// HeaderTimestamp is the delivery's Unix time in seconds.
	HeaderTimestamp = "Fleetq-Timestamp"
	// HeaderSignature is "v1=" and the hex HMAC-SHA256 of
	// "<timestamp>.<body>" under the subscription's secret.
	HeaderSignature = "Fleetq-Signature"
)

// Subscription is one endpoint and its secret. An empty TenantID receives
// every tenant's jobs.
type Subscription struct {
	URL      string
	Secret   string
	TenantID string
}

// Sign is the signature header's value for a body sent at timestamp.
func Sign(secret string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is a delivery whose signature or timestamp does not verify.
var ErrBadSignature = errors.New("webhook signature does not verify")

// Verify checks a delivery as a receiver does: the signature over the
// timestamp and body, and a timestamp within tolerance of now (against
// replays).
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: no timestamp", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s off by %s", ErrBadSignature, h.Get(HeaderTimestamp), d)
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return ErrBadSignature
	}
	return nil
}

// Delivery is the body of a delivery.
type Delivery struct {
	ID     string               `json:"id"`
	Type   string               `json:"type"`
	Time   string               `json:"time"`
	Detail store.JobEventDetail `json:"detail"`
}

// Publisher delivers the events of finished jobs (succeeded, dead,
// canceled) to the subscriptions. It satisfies store.Publisher.
type Publisher struct {
	Subscriptions []Subscription
	// Client sends the deliveries (default: NewClient(Guard{}, 10s)).
	Client *http.Client
	Clock  clock.Clock
}

func finished(status string) bool {
	return status == "succeeded" || status == "dead" || status == "canceled"
}

// Publish posts each finished job's event to each matching subscription and
// fails if any delivery fails (a 2xx answer is a delivery), so the events
// stay in the outbox and are delivered again; receivers deduplicate by
// HeaderEventID.
func (p *Publisher) Publish(ctx context.Context, events []store.JobEvent) error {
	var errs []error
	for _, e := range events {
		if !finished(e.Detail.Status) {
			continue
		}
		body, err := json.Marshal(Delivery{ID: e.ID, Type: e.DetailType, Time: e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), Detail: e.Detail})
		if err != nil {
			return err
		}
		for _, s := range p.Subscriptions {
			if s.TenantID != "" && s.TenantID != e.Detail.TenantID {
				continue
			}
			if err := p.deliver(ctx, s, e.ID, body); err != nil {
				errs = append(errs, fmt.Errorf("event %s to %s: %w", e.ID, redact(s.URL), err))
			}
		}
	}
	return errors.Join(errs...)
}

func (p *Publisher) deliver(ctx context.Context, s Subscription, id string, body []byte) error {
	c := p.Client
	if c == nil {
		c = NewClient(Guard{}, 10*time.Second)
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	return send(ctx, c, clk, s.URL, s.Secret, id, body)
}

// send POSTs one signed delivery; a 2xx answer is a delivery.
func send(ctx context.Context, c *http.Client, clk clock.Clock, target, secret, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := clk.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEventID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, body))
	res, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // without the URL, which may carry the receiver's secret
		}
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %d", res.StatusCode)
	}
	return nil
}

// redact drops a URL's query and user info from logs and errors: they may
// carry a receiver's own secret.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "an unparsable URL"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// ErrForbiddenAddress is a connection refused by the Guard.
var ErrForbiddenAddress = errors.New("the webhook address is not a public address")

// Guard decides which addresses deliveries may connect to: public unicast
// addresses only, never loopback, private (RFC 1918, unique local),
// link-local (which holds the cloud metadata service 169.254.169.254 and
// fd00:ec2::254), carrier-grade NAT, multicast or unspecified ones.
type Guard struct {
	// AllowLoopback admits 127.0.0.0/8 and ::1: the dev stack and tests,
	// whose receivers run on this machine.
	AllowLoopback bool
}

var forbidden = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("fd00:ec2::/32"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

// Allowed says whether a delivery may connect to ip.
func (g Guard) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return g.AllowLoopback
	}
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range forbidden {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// control runs after DNS resolution, on the address actually dialed, so a
// name that resolves (or is rebound) to an internal address is refused too.
func (g Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
	}
	if !g.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
	}
	return nil
}

// NewClient is an HTTP client for deliveries: it connects only to addresses
// the guard allows, follows no redirect (a redirect could point anywhere),
// uses no proxy and gives up after timeout.
func NewClient(g Guard, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout, Control: g.control}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy: nil, DialContext: d.DialContext, ForceAttemptHTTP2: true,
			TLSHandshakeTimeout: timeout, ResponseHeaderTimeout: timeout, MaxIdleConnsPerHost: 4,
		},
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			return fmt.Errorf("the receiver redirected to %s: webhooks follow no redirect", redact(r.URL.String()))
		},
	}
}
