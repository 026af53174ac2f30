package main

import (
	"bytes"
	"strings"
	"testing"
)

// tenantsCLI runs fleetq tenants keys <args> as the dev stack's operator.
func tenantsCLI(t *testing.T, api, token string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"tenants", "keys", args[0], "--api", api, "--operator-token", token}, args[1:]...)
	code := runCLI(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestTenantKeysCreateListRevokeAndActForTheirTenant: an operator creates
// a key (printed once, alone on stdout), a producer uses it with --api-key
// for its tenant's jobs only, the listing names it by its prefix and never
// shows it, and once revoked it is refused.
func TestTenantKeysCreateListRevokeAndActForTheirTenant(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	code, out, errOut := tenantsCLI(t, stack.URL, stack.OperatorToken, "create", "--tenant", "acme", "--name", "render ci", "--expires-in", "720h")
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "fqk1.") || strings.Count(out, "\n") != 1 || !strings.Contains(errOut, "shown only now") {
		t.Fatalf("create: exit %d, %q, %s", code, out, errOut)
	}
	prefix := key[:strings.LastIndex(key, ".")]
	if code, _, errOut := tenantsCLI(t, stack.URL, stack.OperatorToken, "create", "--tenant", "ACME"); code != 1 || !strings.Contains(errOut, "400 invalid_argument") {
		t.Fatalf("create for a case variant: exit %d, %s", code, errOut)
	}
	if code, _, errOut := tenantsCLI(t, stack.URL, stack.OperatorToken, "create"); code != 2 || !strings.Contains(errOut, "--tenant is required") {
		t.Fatalf("create without a tenant: exit %d, %s", code, errOut)
	}

	// The key acts for acme: no --tenant needed, ids are acme's.
	code, out, errOut = cli(t, stack, "submit", "--api-key", key, "--workflow", "demo-sleep", "--job-id", "k-1")
	if code != 0 || strings.TrimSpace(out) != "acme:k-1" {
		t.Fatalf("submit with the key: exit %d, %q %s", code, out, errOut)
	}
	if code, _, errOut := cli(t, stack, "submit", "--api-key", key, "--tenant", "globex", "--workflow", "demo-sleep"); code != 1 || !strings.Contains(errOut, "403 permission_denied") {
		t.Fatalf("submit for another tenant with acme's key: exit %d, %s", code, errOut)
	}
	if code, _, errOut := cli(t, stack, "list", "--api-key", key, "--status", "queued"); code != 1 || !strings.Contains(errOut, "403 permission_denied") {
		t.Fatalf("list with a tenant's key: exit %d, %s", code, errOut)
	}

	code, out, _ = tenantsCLI(t, stack.URL, stack.OperatorToken, "list", "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "KEY") || !strings.Contains(out, prefix) || !strings.Contains(out, "render ci") || !strings.Contains(out, "active") || strings.Contains(out, key) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	code, out, errOut = tenantsCLI(t, stack.URL, stack.OperatorToken, "revoke", prefix)
	if code != 0 || strings.TrimSpace(out) != prefix+"  revoked" {
		t.Fatalf("revoke: exit %d, %q %s", code, out, errOut)
	}
	if code, _, errOut := cli(t, stack, "get", "--api-key", key, "k-1"); code != 1 || !strings.Contains(errOut, "401 unauthenticated") || !strings.Contains(errOut, "revoked") {
		t.Fatalf("get with a revoked key: exit %d, %s", code, errOut)
	}
	if code, _, errOut := tenantsCLI(t, stack.URL, stack.OperatorToken, "revoke", "fqk1.aaaaaaaaaaaaaaaa"); code != 1 || !strings.Contains(errOut, "404 not_found") {
		t.Fatalf("revoke an unknown key: exit %d, %s", code, errOut)
	}
}
