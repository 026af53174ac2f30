package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/domain/signing"
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
	// "<timestamp>.<body>" under the webhook key.
	HeaderSignature = "Fleetq-Signature"
	// HeaderKeyID names the key that made HeaderSignature: the first 16
	// hex digits of the SHA-256 of the key (signing.KeyID), so a receiver
	// holding the current and the previous key knows which one to check.
	HeaderKeyID = "Fleetq-Key-Id"
	// HeaderSignatures is every signature of the delivery, one per key
	// that signs it, each "<key id>:v1=<hex>", separated by ", ": during a
	// rotation window the previous key's (also in HeaderSignature, for
	// receivers that hold only it, a receiver of the previous release
	// included) and the current key's.
	HeaderSignatures = "Fleetq-Signatures"
)

// Sign is the signature header's value for a body sent at timestamp.
func Sign(key []byte, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is a delivery whose signature or timestamp does not verify.
var ErrBadSignature = errors.New("webhook signature does not verify")

// Verify checks a delivery as a receiver does: a timestamp within
// tolerance of now (against replays), and a signature over the timestamp
// and body by a key the receiver holds — the current key, or the previous
// one until its rotation window ends (keys.PreviousUntil) — found by its
// key id among the delivery's signatures (HeaderSignatures, and
// HeaderKeyID with HeaderSignature).
func Verify(keys signing.Ring, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: no timestamp", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s off by %s", ErrBadSignature, h.Get(HeaderTimestamp), d)
	}
	held := false
	for kid, sig := range signatures(h) {
		key, ok := keys.Find(kid, now)
		if !ok {
			continue
		}
		held = true
		if hmac.Equal([]byte(sig), []byte(Sign(key.Secret, ts, body))) {
			return nil
		}
	}
	if !held {
		return fmt.Errorf("%w: no signature names the current key or the previous key within its window", ErrBadSignature)
	}
	return ErrBadSignature
}

// signatures maps the key ids of a delivery's signatures to them.
func signatures(h http.Header) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(h.Get(HeaderSignatures), ",") {
		if kid, sig, ok := strings.Cut(strings.TrimSpace(part), ":"); ok && kid != "" {
			out[kid] = sig
		}
	}
	if kid := h.Get(HeaderKeyID); kid != "" {
		if _, ok := out[kid]; !ok {
			out[kid] = h.Get(HeaderSignature)
		}
	}
	return out
}

// Delivery is the body of a delivery.
type Delivery struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Time   string          `json:"time"`
	Detail jobevent.Detail `json:"detail"`
}

// send POSTs one delivery signed with each of keys (signing.Ring.Signers:
// the first one's signature is also HeaderSignature); a 2xx answer is a
// delivery.
func send(ctx context.Context, c *http.Client, clk clock.Clock, target string, keys []signing.Key, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := clk.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEventID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	all := make([]string, len(keys))
	for i, k := range keys {
		all[i] = k.ID + ":" + Sign(k.Secret, ts, body)
	}
	req.Header.Set(HeaderKeyID, keys[0].ID)
	req.Header.Set(HeaderSignature, Sign(keys[0].Secret, ts, body))
	req.Header.Set(HeaderSignatures, strings.Join(all, ", "))
	res, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry the receiver's secret
		}
		var answered *answerError
		if errors.As(err, &answered) || errors.Is(err, ErrForbiddenAddress) {
			return err
		}
		return &unreachableError{cause: err}
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return &answerError{status: res.StatusCode}
	}
	return nil
}

// answerError is a receiver's answer other than 2xx.
type answerError struct {
	status   int
	redirect bool
}

func (e *answerError) Error() string {
	if e.redirect {
		return fmt.Sprintf("the receiver answered %d: webhooks follow no redirect", e.status)
	}
	return fmt.Sprintf("the receiver answered %d", e.status)
}

// ErrUnreachable is every failure to get an HTTP answer from the receiver.
var ErrUnreachable = errors.New("the receiver could not be reached or did not answer in time")

// unreachableError is a delivery that got no HTTP answer: no connection,
// no TLS, no HTTP, or not in time. Its message is the same whatever the
// cause, because a producer reads it (callback.last_error) and must not
// tell from it whether something listens on a host's port; the cause is
// for the operator's log.
type unreachableError struct{ cause error }

func (e *unreachableError) Error() string { return ErrUnreachable.Error() }

func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }

func (e *unreachableError) Unwrap() error { return e.cause }

// Cause is a delivery error as the operator's log records it: for a
// receiver that could not be reached, what went wrong underneath.
func Cause(err error) string {
	var u *unreachableError
	if errors.As(err, &u) {
		return u.Error() + ": " + u.cause.Error()
	}
	return err.Error()
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
// addresses only. Refused are loopback, private (RFC 1918, unique local),
// link-local (which holds the cloud metadata service 169.254.169.254 and
// fd00:ec2::254), multicast and unspecified addresses, every block of
// IANA's IPv4 and IPv6 special-purpose registries that is not globally
// reachable (and the whole of 2001::/23), and the IPv6 ranges that embed an IPv4 address (NAT64, 6to4,
// Teredo, IPv4-compatible and -translated), which could carry a refused
// IPv4 address past the IPv4 checks.
type Guard struct {
	// AllowLoopback admits 127.0.0.0/8 and ::1: the dev stack and tests,
	// whose receivers run on this machine.
	AllowLoopback bool
}

// forbidden are the special-purpose blocks that the netip predicates in
// Allowed do not already cover.
var forbidden = []netip.Prefix{
	// IPv4 (IANA IPv4 Special-Purpose Address Registry).
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (DS-Lite, NAT64 discovery, …)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the limited broadcast 255.255.255.255
	// IPv6 (IANA IPv6 Special-Purpose Address Registry).
	netip.MustParsePrefix("::/8"),           // reserved: IPv4-compatible ::/96, IPv4-translated ::ffff:0:0:0/96, NAT64 below
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64, well-known prefix: embeds an IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"), // NAT64, local use: embeds an IPv4 address
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("100:0:0:1::/64"), // dummy prefix
	netip.MustParsePrefix("2001::/23"),      // IETF protocol assignments, Teredo 2001::/32 among them (embeds an IPv4 address)
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("2002::/16"),      // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("3fff::/20"),      // documentation
	netip.MustParsePrefix("5f00::/16"),      // segment routing (SRv6) SIDs
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("fd00:ec2::/32"),  // the EC2 metadata service's IPv6 block (also unique local)
}

// Allowed says whether a delivery may connect to ip.
func (g Guard) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return g.AllowLoopback
	}
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsMulticast() {
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
		// Not the address: a producer reads this error, and an allowed
		// name's internal address is not theirs to learn.
		return ErrForbiddenAddress
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
			status := http.StatusFound
			if r.Response != nil {
				status = r.Response.StatusCode
			}
			return &answerError{status: status, redirect: true}
		},
	}
}
