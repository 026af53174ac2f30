package agent

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// Only a refusal of a field the request type has, as an unknown field, is
// left out; a key of free-form JSON, a key refused for its case and a
// field the client did not send are the caller's errors.
func TestOmitOnlyRefusedFieldsOfTheRequest(t *testing.T) {
	t.Parallel()
	body := []byte(`{"worker_id":"w","fleet_slug":"f","stage":"s","max_concurrency":3,"capabilities":{"boot":1,"from_pool":2},"boot":{"runner_ready_at":"x","from_pool":true}}`)
	typ := reflect.TypeOf(wire.RegisterRequest{})
	for _, tc := range []struct {
		message string
		want    string // "": not left out
	}{
		{`unknown field "boot"`, `{"capabilities":{"boot":1,"from_pool":2},"fleet_slug":"f","max_concurrency":3,"stage":"s","worker_id":"w"}`},
		{`unknown field "from_pool"`, `{"boot":{"runner_ready_at":"x"},"capabilities":{"boot":1,"from_pool":2},"fleet_slug":"f","max_concurrency":3,"stage":"s","worker_id":"w"}`},
		{`invalid body: json: unknown field "boot"`, `{"capabilities":{"boot":1,"from_pool":2},"fleet_slug":"f","max_concurrency":3,"stage":"s","worker_id":"w"}`},
		{`unknown field "Boot": keys are case-sensitive, did you mean "boot"?`, ""},
		{`unknown field "agent_key"`, ""}, // not sent
		{`unknown field "nope"`, ""},      // not a field of the request
		{`field "boot": must be an object, got string`, ""},
	} {
		err := &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: tc.message}
		got := ""
		if f, ok := refusedField(err); ok {
			if out, ok := omit(body, typ, f); ok {
				got = string(out)
			}
		}
		if got != tc.want {
			t.Errorf("%s: sent %s, want %q", tc.message, got, tc.want)
		}
	}
	if _, ok := refusedField(&wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: `unknown field "boot"`}); ok {
		t.Error("a 409 taken for a refused field")
	}
}
