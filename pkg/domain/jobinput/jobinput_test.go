package jobinput_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/jobinput"
)

func TestParseRefsKeepsTenantsApart(t *testing.T) {
	cases := []struct {
		input string
		want  string // "" accepts
	}{
		{`{}`, ""},
		{`{"prompt":{"3":{}}}`, ""},
		{`{"input_keys":{"image":"tenants/acme/uploads/1/cat.png"},"outputs":["video.mp4","thumb.jpg"]}`, ""},
		{`{"input_keys":{"image":"tenants/evil/uploads/1/cat.png"}}`, `under this tenant's prefix "tenants/acme/"`},
		{`{"input_keys":{"image":"tenants/acme"}}`, "prefix"},
		{`{"input_keys":{"image":"tenants/acme/"}}`, "prefix"},
		{`{"input_keys":{"image":"tenants/acme/../evil/x"}}`, `must not contain ".."`},
		{`{"input_keys":{"image":"tenants/acme//x"}}`, "empty segments"},
		{`{"input_keys":{"../x":"tenants/acme/x"}}`, "name"},
		{`{"input_keys":["tenants/acme/x"]}`, "object of names"},
		{`{"outputs":"video.mp4"}`, "list of output names"},
		{`{"outputs":["a","a"]}`, "unique"},
		{`{"outputs":["a/b"]}`, "unique name"},
	}
	for _, c := range cases {
		_, err := jobinput.ParseRefs("acme", json.RawMessage(c.input))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.input, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want one mentioning %q", c.input, err, c.want)
		}
	}
}
