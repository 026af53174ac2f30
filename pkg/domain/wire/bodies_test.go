package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// A heartbeat answers URLs only when they were refreshed; then input_urls
// and output_url are present even when empty, as the poll answers them.
func TestHeartbeatResponseCarriesURLsOnlyWhenRefreshed(t *testing.T) {
	at := "2025-01-02T03:04:05.000Z"
	plain, err := json.Marshal(wire.HeartbeatResponse{LeaseExpiresAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(plain); got != `{"lease_expires_at":"2025-01-02T03:04:05.000Z","cancel":false}` {
		t.Fatalf("without refresh: %s", got)
	}
	refreshed, err := json.Marshal(wire.HeartbeatResponse{LeaseExpiresAt: &at, LeaseURLs: &wire.LeaseURLs{InputURLs: map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(refreshed); got != `{"lease_expires_at":"2025-01-02T03:04:05.000Z","cancel":false,"input_urls":{},"output_url":""}` {
		t.Fatalf("with refresh: %s", got)
	}

	var back wire.HeartbeatResponse
	if err := json.Unmarshal([]byte(`{"lease_expires_at":null,"cancel":true,"output_url":"https://put","output_urls":{"a":"https://a"}}`), &back); err != nil {
		t.Fatal(err)
	}
	if !back.Cancel || back.LeaseURLs == nil || back.OutputURL != "https://put" || back.OutputURLs["a"] != "https://a" {
		t.Fatalf("decoded %+v", back)
	}
	var bare wire.HeartbeatResponse
	if err := json.Unmarshal(plain, &bare); err != nil {
		t.Fatal(err)
	}
	if bare.LeaseURLs != nil {
		t.Fatalf("URLs decoded from an answer without them: %+v", bare.LeaseURLs)
	}
}

// A lease reference is inlined: reports are flat objects.
func TestReportsInlineTheLease(t *testing.T) {
	yes := false
	data, err := json.Marshal(wire.FailRequest{LeaseRef: wire.LeaseRef{JobID: "j", LeaseToken: "t"},
		Error: &wire.FailError{Message: "m", Retryable: &yes}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); got != `{"job_id":"j","lease_token":"t","error":{"message":"m","retryable":false,"code":""}}` {
		t.Fatalf("fail body %s", got)
	}
}
