package api_test

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// TestPythonClient runs the Python client's tests (clients/python) against
// a dev stack. The client's traffic goes through a proxy that checks every
// request and answer against the OpenAPI document.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Unavailable(t, "python3 is not installed: the Python client (clients/python) is not tested")
	}
	h := newHarness(t)
	target, err := url.Parse(h.stack.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = h.http.Transport
	checked := httptest.NewServer(proxy)
	t.Cleanup(checked.Close)

	dir, err := filepath.Abs("../../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), python, "-m", "unittest", "-v", "test_fleetq")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PYTHONDONTWRITEBYTECODE=1",
		"FLEETQ_API="+checked.URL,
		"FLEETQ_OPERATOR_TOKEN="+operatorToken,
		"FLEETQ_FLEET_SECRET="+secretOf("gpu"),
		"FLEETQ_STAGE=test",
		"FLEETQ_FLEET=gpu",
		"FLEETQ_WORKFLOW=wf-a",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest test_fleetq:\n%s", out)
	if err != nil {
		t.Fatalf("the Python client's tests failed: %v", err)
	}
}
