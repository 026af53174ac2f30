package submission

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

func TestCallbackURL(t *testing.T) {
	cfg := fleetconfig.Default()
	cfg.Webhooks.AllowedHosts = []string{"hooks.example.com", "*.receivers.example.org", "alt.example.com:8443", "plain.example.com:80", "203.0.113.10", "*.ports.example.net:9000"}
	ok := []string{
		"https://hooks.example.com/fleetq?token=abc",
		"https://HOOKS.example.com:443/x",
		"https://hooks.example.com:0443/x", // port 443 as a dialer reads it
		"https://a.receivers.example.org/",
		"https://alt.example.com:8443/x",
		"http://plain.example.com/",
		"http://plain.example.com:80/",
		"https://203.0.113.10/hook",
		"https://a.ports.example.net:9000/",
	}
	for _, u := range ok {
		s, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","callback_url":"`+u+`"}`), cfg)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if s.Spec().CallbackURL != u {
			t.Errorf("Spec().CallbackURL = %q, want %q", s.Spec().CallbackURL, u)
		}
	}
	refused := map[string]string{
		"https://evil.example.com/":                 `host "evil.example.com" is not among`,
		"https://169.254.169.254/latest/meta-data/": `host "169.254.169.254" is not among`,
		"http://10.0.0.7/hook":                      `host "10.0.0.7" is not among`,
		"http://localhost:8080/":                    `host "localhost" is not among`,
		"https://receivers.example.org/":            `host "receivers.example.org" is not among`,
		"https://hooks.example.com.evil.net/":       `is not among`,
		"ftp://hooks.example.com/":                  `absolute https://`,
		"/relative":                                 `absolute https://`,
		"https://user:pw@hooks.example.com/":        `user info`,
		"https://hooks.example.com/#frag":           `fragment`,
		"https://hooks.example.com/" + strings.Repeat("a", MaxCallbackURLBytes): `at most 2048`,
		// Port 443 unless an entry names the port.
		"https://hooks.example.com:8443/x": `port 8443 of host "hooks.example.com" is not allowed`,
		"https://hooks.example.com:22/":    `port 22 of host "hooks.example.com" is not allowed`,
		"http://hooks.example.com/":        `port 80 of host "hooks.example.com" is not allowed`,
		"http://a.receivers.example.org/":  `port 80 of host "a.receivers.example.org"`,
		"https://alt.example.com/":         `port 443 of host "alt.example.com" is not allowed`,
		"https://alt.example.com:8444/":    `port 8444`,
		"https://plain.example.com/":       `port 443 of host "plain.example.com"`,
		"https://203.0.113.10:8080/":       `port 8080`,
		"https://a.ports.example.net/":     `port 443 of host "a.ports.example.net"`,
		"https://hooks.example.com:99999/": `is not allowed`,
	}
	for u, want := range refused {
		_, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","callback_url":"`+u+`"}`), cfg)
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", u, err, want)
		}
	}
	// A wildcard matches DNS names only, never an IP address.
	wild := fleetconfig.Default()
	wild.Webhooks.AllowedHosts = []string{"*.example.com", "*.1.ip.example"}
	for _, u := range []string{"https://10.0.0.1/", "https://127.0.0.1/", "https://1.1.1.1/", "https://[::1]/", "https://[64:ff9b::a00:1]/"} {
		if _, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","callback_url":"`+u+`"}`), wild); err == nil || !strings.Contains(err.Error(), "is not among") {
			t.Errorf("%s under wildcards: %v", u, err)
		}
	}
	none := fleetconfig.Default()
	_, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","callback_url":"https://hooks.example.com/"}`), none)
	if err == nil || !strings.Contains(err.Error(), "accepts no callbacks") {
		t.Fatalf("a stage without allowed hosts: %v", err)
	}
}
