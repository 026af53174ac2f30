package submission

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

func TestCallbackURL(t *testing.T) {
	cfg := fleetconfig.Default()
	cfg.Webhooks.AllowedHosts = []string{"hooks.example.com", "*.receivers.example.org"}
	ok := []string{
		"https://hooks.example.com/fleetq?token=abc",
		"https://HOOKS.example.com:8443/x",
		"http://a.receivers.example.org/",
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
	}
	for u, want := range refused {
		_, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","callback_url":"`+u+`"}`), cfg)
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", u, err, want)
		}
	}
	none := fleetconfig.Default()
	_, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","callback_url":"https://hooks.example.com/"}`), none)
	if err == nil || !strings.Contains(err.Error(), "accepts no callbacks") {
		t.Fatalf("a stage without allowed hosts: %v", err)
	}
}
