package fleetconfig

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Webhooks is the stage's job-outcome callbacks: which hosts a producer's
// callback_url may name, and how hard a delivery is tried. With no
// allowed host the stage accepts no callback_url. Deliveries are signed
// with the stage's webhook key, a secret of its own (docs/api.md,
// "Webhooks").
type Webhooks struct {
	// AllowedHosts are the hosts a callback_url may name: a host name, an
	// IPv4 address, or "*.example.com" (any DNS name under example.com; a
	// wildcard never matches an IP address), each optionally with a port
	// ("hooks.example.com:8443"). An entry without a port allows port 443
	// only, so an http:// URL needs an entry naming port 80. Matching is
	// exact and case insensitive; no scheme or path.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// MaxAttempts is how many deliveries of one outcome are tried before it
	// is recorded as failed (default 8).
	MaxAttempts int `yaml:"max_attempts"`
	// Timeout bounds one delivery: connecting, sending and the receiver's
	// answer (default 10s, at most 15s).
	Timeout Duration `yaml:"timeout"`
}

// Webhook defaults and limits.
const (
	DefaultWebhookAttempts = 8
	DefaultWebhookTimeout  = 10 * time.Second
	MaxWebhookAttempts     = 20
	// MaxWebhookTimeout keeps a round of deliveries well inside the scaler
	// function's time limit.
	MaxWebhookTimeout = 15 * time.Second
)

var hostPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

var portPattern = regexp.MustCompile(`^[0-9]{1,5}$`)

// DefaultCallbackPort is the only port an allowed_hosts entry without a
// port allows.
const DefaultCallbackPort = 443

// allowedHost is one parsed allowed_hosts entry.
type allowedHost struct {
	host     string // the name or address; a wildcard's without its "*"
	wildcard bool
	port     int
}

// parseAllowedHost splits an entry into host and port and checks it: a
// host name or IPv4 address, optionally "*."; a port of 1-65535. A
// wildcard must end in a DNS name's last label (one starting with a
// letter), so it can never match an address ("*.0.1").
func parseAllowedHost(entry string) (allowedHost, error) {
	h := allowedHost{host: entry, port: DefaultCallbackPort}
	host, port, hasPort := strings.Cut(entry, ":")
	if !hostPattern.MatchString(host) || (hasPort && !portPattern.MatchString(port)) {
		return h, errors.New("must be a lowercase host name or IPv4 address, optionally starting with \"*.\" and ending with \":<port>\" (no scheme or path)")
	}
	if hasPort {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || port != strconv.Itoa(p) {
			return h, fmt.Errorf("port %q must be a number from 1 to 65535", port)
		}
		h.host, h.port = host, p
	}
	if suffix, ok := strings.CutPrefix(h.host, "*"); ok {
		if !isDNSName(suffix[1:]) {
			return h, errors.New("a wildcard matches DNS names only: its last label must start with a letter")
		}
		h.host, h.wildcard = suffix, true
	}
	return h, nil
}

// isDNSName says whether host is a DNS name rather than an address: not
// an IP address, and its last label (a top-level domain) starts with a
// letter, which no address form a resolver may accept (such as "127.1"
// or "0x7f.1") does.
func isDNSName(host string) bool {
	if _, err := netip.ParseAddr(host); err != nil && host != "" {
		last := host[strings.LastIndex(host, ".")+1:]
		return last != "" && last[0] >= 'a' && last[0] <= 'z'
	}
	return false
}

func (w *Webhooks) applyDefaults() {
	if w.MaxAttempts == 0 {
		w.MaxAttempts = DefaultWebhookAttempts
	}
	if w.Timeout == 0 {
		w.Timeout = Duration(DefaultWebhookTimeout)
	}
}

func (w *Webhooks) validate(k *checker) {
	for i, h := range w.AllowedHosts {
		if _, err := parseAllowedHost(h); err != nil {
			k.add(fmt.Sprintf("webhooks.allowed_hosts[%d]", i), "%q: %v", h, err)
		}
	}
	k.rangeInt("webhooks.max_attempts", w.MaxAttempts, 1, MaxWebhookAttempts)
	if t := w.Timeout.Std(); t < time.Second || t > MaxWebhookTimeout {
		k.add("webhooks.timeout", "must be between 1s and %s, got %s", MaxWebhookTimeout, w.Timeout)
	}
}

// HostAllowed says whether a callback_url may name host on some port.
func (w Webhooks) HostAllowed(host string) bool {
	return w.allows(host, 0)
}

// Allowed says whether a callback_url may name host and port: an entry
// matches the host, and names the port (an entry without a port names
// 443). A wildcard entry matches DNS names only, never an IP address.
func (w Webhooks) Allowed(host string, port int) bool {
	return port > 0 && w.allows(host, port)
}

// allows matches host against the entries; port 0 matches any port.
func (w Webhooks) allows(host string, port int) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := isDNSName(host)
	for _, entry := range w.AllowedHosts {
		a, err := parseAllowedHost(entry)
		if err != nil || (port != 0 && a.port != port) {
			continue
		}
		if a.wildcard {
			if name && strings.HasSuffix(host, a.host) && len(host) > len(a.host) {
				return true
			}
		} else if host == a.host {
			return true
		}
	}
	return false
}
