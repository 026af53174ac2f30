package webhook_test

import (
	"errors"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type received struct {
	path   string
	header http.Header
	body   []byte
}

func TestVerifyRefusesTamperingAndReplays(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"e1"}`)
	h := http.Header{}
	h.Set(webhook.HeaderTimestamp, "1735787045")
	h.Set(webhook.HeaderSignature, webhook.Sign([]byte("s"), 1735787045, body))
	h.Set(webhook.HeaderKeyID, signing.KeyID("s"))
	now := time.Unix(1735787045, 0).Add(time.Minute)
	if err := webhook.Verify(ring("s"), h, body, now, 5*time.Minute); err != nil {
		t.Fatalf("a good delivery: %v", err)
	}
	for name, check := range map[string]error{
		"other body":   webhook.Verify(ring("s"), h, []byte(`{"id":"e2"}`), now, 5*time.Minute),
		"other secret": webhook.Verify(ring("t"), h, body, now, 5*time.Minute),
		"replayed":     webhook.Verify(ring("s"), h, body, now.Add(time.Hour), 5*time.Minute),
		"no key id":    webhook.Verify(ring("s"), withHeader(h, webhook.HeaderKeyID, ""), body, now, 5*time.Minute),
		"other key id": webhook.Verify(ring("s"), withHeader(h, webhook.HeaderKeyID, signing.KeyID("t")), body, now, 5*time.Minute),
	} {
		if !errors.Is(check, webhook.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, check)
		}
	}
	h.Set(webhook.HeaderTimestamp, "1735787046") // signature of another time
	if err := webhook.Verify(ring("s"), h, body, now, 5*time.Minute); !errors.Is(err, webhook.ErrBadSignature) {
		t.Errorf("moved timestamp: %v", err)
	}
}

func TestGuardRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ addr, why string }{
		{"127.0.0.1", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "link-local: the metadata service"},
		{"fd00:ec2::254", "the metadata service over IPv6"},
		{"fe80::1", "link-local"},
		{"fc00::1", "unique local"},
		{"100.64.0.1", "shared address space"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "global multicast"},
		{"192.0.0.8", "IETF protocol assignments"},
		{"192.0.0.170", "NAT64 discovery"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"192.88.99.1", "6to4 relay anycast"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "limited broadcast"},
		{"::ffff:127.0.0.1", "IPv4-mapped loopback"},
		{"::ffff:169.254.169.254", "IPv4-mapped metadata service"},
		{"::127.0.0.1", "IPv4-compatible loopback"},
		{"::ffff:0:7f00:1", "IPv4-translated loopback"},
		{"64:ff9b::7f00:1", "NAT64 of 127.0.0.1"},
		{"64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254"},
		{"64:ff9b::808:808", "NAT64 even of a public address"},
		{"64:ff9b:1::a00:1", "local-use NAT64 of 10.0.0.1"},
		{"2002:7f00:1::1", "6to4 of 127.0.0.1"},
		{"2002:a9fe:a9fe::1", "6to4 of 169.254.169.254"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo (embeds 127.0.0.1, obfuscated)"},
		{"2001:2::1", "benchmarking"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"100::1", "discard-only"},
		{"5f00::1", "SRv6 SIDs"},
		{"fec0::1", "site-local"},
	} {
		if (webhook.Guard{}).Allowed(netip.MustParseAddr(c.addr)) {
			t.Errorf("%s (%s) is allowed", c.addr, c.why)
		}
		if !netip.MustParseAddr(c.addr).Unmap().IsLoopback() && (webhook.Guard{AllowLoopback: true}).Allowed(netip.MustParseAddr(c.addr)) {
			t.Errorf("%s (%s) is allowed with AllowLoopback", c.addr, c.why)
		}
	}
	for _, a := range []string{"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "8.8.8.8", "1.1.1.1", "2a00:1450:4001:82a::200e",
		"192.0.1.1", "192.31.196.1", "198.20.0.1", "223.255.255.1", "::ffff:8.8.8.8", "2003::1"} {
		if !(webhook.Guard{}).Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s is refused", a)
		}
	}
	if !(webhook.Guard{AllowLoopback: true}).Allowed(netip.MustParseAddr("127.0.0.1")) || (webhook.Guard{AllowLoopback: true}).Allowed(netip.MustParseAddr("10.0.0.1")) {
		t.Error("AllowLoopback admits loopback and nothing else")
	}

}

func key(secret string) signing.Key {
	k, err := signing.NewKey(secret)
	if err != nil {
		panic(err)
	}
	return k
}

// ring is a receiver's keys: secret's key alone.
func ring(secret string) signing.Ring { return signing.Ring{Current: key(secret)} }

func withHeader(h http.Header, name, value string) http.Header {
	c := h.Clone()
	c.Set(name, value)
	return c
}
