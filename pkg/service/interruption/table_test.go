package interruption_test

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/service/interruption"
)

// Every kind a handled event's parser may give has an action, every action
// is for such a kind, and each detail type is handled once, from the source
// that sends it.
func TestEveryHandledKindHasAnAction(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	kinds := map[interruption.Kind]bool{}
	for _, h := range interruption.HandledEvents() {
		if seen[h.DetailType] {
			t.Errorf("%q is handled twice", h.DetailType)
		}
		seen[h.DetailType] = true
		if h.Source == "" || h.Rule.ID == "" || h.Rule.Name == "" || len(h.Kinds) == 0 {
			t.Errorf("%q: incomplete row %+v", h.DetailType, h)
		}
		for _, k := range h.Kinds {
			kinds[k] = true
			if interruption.Does(k) == "" {
				t.Errorf("%q gives %s, which has no action", h.DetailType, k)
			}
		}
		// From another source, the same detail type is not handled.
		_, err := interruption.Parse(events.CloudWatchEvent{Source: "fleetq.test", DetailType: h.DetailType, Detail: []byte(`{}`)})
		if err == nil {
			t.Errorf("%q from another source parsed", h.DetailType)
		}
	}
	for _, k := range interruption.ActionKinds() {
		if !kinds[k] {
			t.Errorf("%s has an action but no handled event gives it", k)
		}
	}
}

// Rows sharing a rule share its source and detail filter: the stack makes
// one rule of them.
func TestRowsOfARuleAgree(t *testing.T) {
	t.Parallel()
	first := map[interruption.Rule]interruption.Handled{}
	for _, h := range interruption.HandledEvents() {
		f, ok := first[h.Rule]
		if !ok {
			first[h.Rule] = h
			continue
		}
		if f.Source != h.Source || f.OfGroups != h.OfGroups || len(f.Detail) != len(h.Detail) {
			t.Errorf("rule %s: %q and %q differ in source or filter", h.Rule.ID, f.DetailType, h.DetailType)
		}
	}
}

// TestDocsTableIsTheHandledEvents keeps docs/scaling.md's table of signals
// equal to the table: one row per handled detail type and kind, with its
// source and what is done, both ways.
func TestDocsTableIsTheHandledEvents(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var documented []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), " | ")
		if len(cells) != 4 || !strings.HasPrefix(cells[0], "| `aws.") {
			continue
		}
		documented = append(documented, strings.TrimPrefix(sc.Text(), "| "))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, h := range interruption.HandledEvents() {
		for _, k := range h.Kinds {
			want = append(want, "`"+h.Source+"` | "+h.DetailType+" | `"+string(k)+"` | "+interruption.Does(k)+" |")
		}
	}
	for _, row := range want {
		if !slices.Contains(documented, row) {
			t.Errorf("docs/scaling.md's table lacks the row\n| %s", row)
		}
	}
	for _, row := range documented {
		if !slices.Contains(want, row) {
			t.Errorf("docs/scaling.md's table has a row the handler does not handle\n| %s", row)
		}
	}
}

// TestDocsOutcomesAreTheHandlers keeps docs/scaling.md's table of outcomes
// equal to the handler's, both ways and in order.
func TestDocsOutcomesAreTheHandlers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	// The rows of the table under the section "### What the handler did".
	var documented []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			in = line == "### What the handler did"
		case in && strings.HasPrefix(line, "| `"):
			documented = append(documented, line)
		}
	}
	var want []string
	for _, o := range interruption.Outcomes() {
		if interruption.Means(o) == "" {
			t.Errorf("outcome %q means nothing", o)
		}
		want = append(want, "| `"+string(o)+"` | "+interruption.Means(o)+" |")
	}
	if !slices.Equal(documented, want) {
		t.Errorf("docs/scaling.md's outcomes:\n%s\nwant:\n%s", strings.Join(documented, "\n"), strings.Join(want, "\n"))
	}
}
