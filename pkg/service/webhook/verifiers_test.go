package webhook_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

// pythonVerifiers runs, for each case, the Python example of docs/api.md
// ("Webhooks") and the Python client's verify_webhook, and prints one line
// per case and verifier: "ok" or the error.
const pythonVerifiers = `
import base64, json, sys, types
sys.path.insert(0, sys.argv[1])
import fleetq
ns = {}
exec(sys.argv[2], ns)
for c in json.load(sys.stdin):
    body = base64.b64decode(c["body"])
    ns["time"] = types.SimpleNamespace(time=lambda: c["now"])
    for name, check in (
        ("docs", lambda: ns["verify"](c["headers"], body, c["key"], c["previous"], c["until"])),
        ("client", lambda: fleetq.verify_webhook(c["headers"], body, c["key"], c["previous"], c["until"], now=c["now"])),
    ):
        try:
            check()
            print(name, "ok")
        except Exception as e:
            print(name, type(e).__name__)
`

// docsPython is the Python example of the callbacks section of docs/api.md.
func docsPython(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "In Python, with the standard library:\n\n```python\n")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(code, "def verify(") {
		t.Fatal("docs/api.md has no Python verification example in its webhooks section")
	}
	return code
}

// The documented verifiers — the Python example of docs/api.md and the
// Python client's verify_webhook — accept deliveries fleetq signed with the
// current key, and with the previous key only within the rotation window;
// tampering, stale timestamps and unknown keys are refused.
func TestDocumentedVerifiersAcceptOnlyWhatTheyShould(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the documented Python verifiers are not tested")
	}
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusOK, http.StatusOK)
	const newKey = "webhook-key-after-rotation"
	sign := func(id, key string) received {
		e.keys.use(key)
		e.finish(id, srv.URL+"/h")
		if n := e.deliver(); n != 1 {
			t.Fatalf("%s: delivered %d", id, n)
		}
		r := got()
		return r[len(r)-1]
	}
	old, cur := sign("old", webhookKey), sign("new", newKey)
	// Within a rotation window fleetq signs with both keys.
	oldKey, _ := signing.NewKey(webhookKey)
	curKey, _ := signing.NewKey(newKey)
	e.keys.mu.Lock()
	e.keys.ring = signing.Ring{Current: curKey, Previous: oldKey, PreviousUntil: e.clk.Now().Add(time.Hour)}
	e.keys.mu.Unlock()
	e.finish("both", srv.URL+"/h")
	if n := e.deliver(); n != 1 {
		t.Fatalf("both: delivered %d", n)
	}
	both := got()[2]
	at := float64(e.clk.Now().Unix())
	until := at + 3600
	type tc struct {
		Name     string            `json:"name"`
		Headers  map[string]string `json:"headers"`
		Body     string            `json:"body"`
		Key      string            `json:"key"`
		Previous string            `json:"previous"`
		Until    float64           `json:"until"`
		Now      float64           `json:"now"`
		want     bool
	}
	headers := func(r received, set ...string) map[string]string {
		h := map[string]string{}
		for _, k := range []string{webhook.HeaderEventID, webhook.HeaderTimestamp, webhook.HeaderKeyID, webhook.HeaderSignature, webhook.HeaderSignatures} {
			h[k] = r.header.Get(k)
		}
		for i := 0; i+1 < len(set); i += 2 {
			h[set[i]] = set[i+1]
		}
		return h
	}
	b64 := base64.StdEncoding.EncodeToString
	cases := []tc{
		{Name: "current key", Headers: headers(cur), Body: b64(cur.body), Key: newKey, Previous: webhookKey, Until: until, Now: at, want: true},
		{Name: "previous key within the window", Headers: headers(old), Body: b64(old.body), Key: newKey, Previous: webhookKey, Until: until, Now: at, want: true},
		{Name: "previous key after the window", Headers: headers(old), Body: b64(old.body), Key: newKey, Previous: webhookKey, Until: at, Now: at},
		{Name: "previous key, none held", Headers: headers(old), Body: b64(old.body), Key: newKey, Now: at},
		{Name: "other body", Headers: headers(cur), Body: b64(append(bytes.Clone(cur.body), ' ')), Key: newKey, Now: at},
		{Name: "stale timestamp", Headers: headers(cur), Body: b64(cur.body), Key: newKey, Now: at + 301},
		{Name: "moved timestamp", Headers: headers(cur, webhook.HeaderTimestamp, "1"), Body: b64(cur.body), Key: newKey, Now: 1},
		{Name: "current key's id on the old signature", Headers: headers(old, webhook.HeaderKeyID, cur.header.Get(webhook.HeaderKeyID), webhook.HeaderSignatures, ""), Body: b64(old.body), Key: newKey, Previous: webhookKey, Until: until, Now: at},
		{Name: "no key id", Headers: headers(cur, webhook.HeaderKeyID, "", webhook.HeaderSignatures, ""), Body: b64(cur.body), Key: newKey, Now: at},
		{Name: "both keys signed, the new one held", Headers: headers(both), Body: b64(both.body), Key: newKey, Now: at, want: true},
		{Name: "both keys signed, the old one held", Headers: headers(both), Body: b64(both.body), Key: webhookKey, Now: at, want: true},
		{Name: "both keys signed, neither held", Headers: headers(both), Body: b64(both.body), Key: "another-key", Now: at},
		{Name: "current key's id on the old signature in the list", Headers: headers(old, webhook.HeaderSignatures, cur.header.Get(webhook.HeaderKeyID)+":"+old.header.Get(webhook.HeaderSignature)),
			Body: b64(old.body), Key: newKey, Now: at},
	}
	in, _ := json.Marshal(cases)
	dir, _ := filepath.Abs("../../../clients/python")
	cmd := exec.CommandContext(t.Context(), python, "-c", pythonVerifiers, dir, docsPython(t))
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2*len(cases) {
		t.Fatalf("python3 printed %d lines for %d cases:\n%s", len(lines), len(cases), out)
	}
	for i, c := range cases {
		for j, verifier := range []string{"docs", "client"} {
			line := lines[2*i+j]
			if ok := line == verifier+" ok"; ok != c.want {
				t.Errorf("%s, %s verifier: %q, want ok=%v", c.Name, verifier, line, c.want)
			}
		}
	}
}
