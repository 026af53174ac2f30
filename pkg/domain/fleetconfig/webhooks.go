package fleetconfig

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Webhooks is the stage's job-outcome callbacks: which hosts a producer's
// callback_url may name, and how hard a delivery is tried. With no
// allowed host the stage accepts no callback_url. The signing key is
// derived from the stage's fleet secret (docs/api.md, "Webhooks").
type Webhooks struct {
	// AllowedHosts are host names (or "*.example.com": any name under
	// example.com) a callback_url may name. Matching is exact and case
	// insensitive; no port, scheme or path.
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
		if !hostPattern.MatchString(h) {
			k.add(fmt.Sprintf("webhooks.allowed_hosts[%d]", i), "%q must be a lowercase host name or IP address, optionally starting with \"*.\" (no scheme, port or path)", h)
		}
	}
	k.rangeInt("webhooks.max_attempts", w.MaxAttempts, 1, MaxWebhookAttempts)
	if t := w.Timeout.Std(); t < time.Second || t > MaxWebhookTimeout {
		k.add("webhooks.timeout", "must be between 1s and %s, got %s", MaxWebhookTimeout, w.Timeout)
	}
}

// HostAllowed says whether a callback_url may name host (without port).
func (w Webhooks) HostAllowed(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, a := range w.AllowedHosts {
		if suffix, ok := strings.CutPrefix(a, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}
