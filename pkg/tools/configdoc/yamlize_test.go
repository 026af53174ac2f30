package configdoc

import "testing"

// TestYamlizeLeavesQuotedTitles: a field's Go name becomes its YAML key,
// but not inside a quoted section title of another document.
func TestYamlizeLeavesQuotedTitles(t *testing.T) {
	names := map[string]string{"Warm": "warm", "Forecast": "forecast"}
	got := yamlize(`Warm are the hours (docs/scaling.md, "Warm capacity"); see Forecast and "Forecast".`, names)
	want := "`warm` are the hours (docs/scaling.md, \"Warm capacity\"); see `forecast` and \"Forecast\"."
	if got != want {
		t.Errorf("yamlize = %s, want %s", got, want)
	}
}
