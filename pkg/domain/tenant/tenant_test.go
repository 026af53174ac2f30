package tenant

import "testing"

func TestValidIDAcceptsOnlyTheCanonicalSpelling(t *testing.T) {
	for _, id := range []string{"a", "acme", "t1", "acme-video", "0", "a-b-c", "abcdefghijklmnopqrstuvwxyz012345"} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range []string{"", "ACME", "Acme", "acme.", "acme ", " acme", "-acme", "acme-", "ac_me", "ac.me", "ac:me",
		"acmé", "аcme" /* Cyrillic а */, "acme\n", "abcdefghijklmnopqrstuvwxyz0123456", "../x", "*"} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
	if err := CheckID("tenant_id", "ACME"); err == nil {
		t.Fatal("CheckID accepted a case variant")
	}
	if err := CheckID("tenant_id", ""); err == nil {
		t.Fatal("CheckID accepted an empty id")
	}
}

func TestJobIDIsScopedToItsTenant(t *testing.T) {
	for _, c := range []struct{ tenant, key, want string }{
		{"acme", "render-1", "acme:render-1"},
		{"globex", "render-1", "globex:render-1"},
		{"acme", "acme:render-1", "acme:render-1"},
		{"globex", "acme:render-1", "globex:acme:render-1"},
		{"acme", "batch:7", "acme:batch:7"},
		{"acme", "acmex:1", "acme:acmex:1"},
	} {
		if got := JobID(c.tenant, c.key); got != c.want {
			t.Errorf("JobID(%q, %q) = %q, want %q", c.tenant, c.key, got, c.want)
		}
		if got, ok := OfJob(c.want); !ok || got != c.tenant {
			t.Errorf("OfJob(%q) = %q, %v", c.want, got, ok)
		}
	}
	if _, ok := OfJob("no-tenant"); ok {
		t.Fatal("OfJob named a tenant of an unqualified id")
	}
	for _, c := range []struct{ tenant, id, key string }{
		{"acme", "acme:render-1", "render-1"},
		{"acme", "acme:batch:7", "batch:7"},
		{"acme", "globex:render-1", ""},
		{"acme", "acmex:1", ""},
		{"acme", "render-1", ""},
	} {
		if got := KeyOf(c.tenant, c.id); got != c.key {
			t.Errorf("KeyOf(%q, %q) = %q, want %q", c.tenant, c.id, got, c.key)
		}
	}
}

func TestPrincipals(t *testing.T) {
	role, err := ParseConfigPrincipal("arn:aws:iam::123456789012:role/producers/AcmeProducer")
	if err != nil {
		t.Fatal(err)
	}
	for _, caller := range []string{
		"arn:aws:sts::123456789012:assumed-role/AcmeProducer/session-1",
		"arn:aws:sts::123456789012:assumed-role/acmeproducer/i-0abc",
		"arn:aws:iam::123456789012:role/AcmeProducer",
		"arn:aws:iam::123456789012:role/other/path/AcmeProducer",
	} {
		p, err := ParseCaller(caller)
		if err != nil || p.Key() != role.Key() {
			t.Errorf("ParseCaller(%q) = %v (%v), want the key of %v", caller, p.Key(), err, role)
		}
	}
	for _, other := range []string{
		"arn:aws:sts::210987654321:assumed-role/AcmeProducer/s",
		"arn:aws:sts::123456789012:assumed-role/AcmeProducer2/s",
		"arn:aws:iam::123456789012:user/AcmeProducer",
		"arn:aws-cn:sts::123456789012:assumed-role/AcmeProducer/s",
	} {
		p, err := ParseCaller(other)
		if err != nil {
			t.Fatalf("ParseCaller(%q): %v", other, err)
		}
		if p.Key() == role.Key() {
			t.Errorf("%q is taken for %v", other, role)
		}
	}
	for _, bad := range []string{"", "acme", "arn:aws:iam::123456789012:role/*", "arn:aws:iam::123456789012:group/g",
		"arn:aws:iam::12345:role/r", "arn:aws:s3:::bucket", "arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:root"} {
		if _, err := ParseConfigPrincipal(bad); err == nil {
			t.Errorf("ParseConfigPrincipal(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"arn:aws:sts::123456789012:assumed-role/r", "arn:aws:sts::123456789012:federated-user/u", "AKIA"} {
		if _, err := ParseCaller(bad); err == nil {
			t.Errorf("ParseCaller(%q) accepted", bad)
		}
	}
}
