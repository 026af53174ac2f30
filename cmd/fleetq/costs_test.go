package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCostsGroupsTheAPIsTotals(t *testing.T) {
	t.Parallel()
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/admin/costs" || r.Header.Get("Authorization") != "Bearer op" {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
			return
		}
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"since":"2026-03-01T12:00:00Z","total_usd":3.5,"groups":[
			{"tenant_id":"acme","fleet_slug":"gpu","workflow_id":"sdxl","jobs":4,"unpriced":0,"cost_usd":2},
			{"tenant_id":"globex","fleet_slug":"gpu","workflow_id":"sdxl","jobs":2,"unpriced":1,"cost_usd":0.5},
			{"tenant_id":"acme","fleet_slug":"video","workflow_id":"upscale","jobs":1,"unpriced":0,"cost_usd":1}]}`))
	}))
	defer srv.Close()

	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"costs", "--api", srv.URL, "--operator-token", "op", "--since", "48h", "--by", "tenant"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if query != "since=48h" {
		t.Fatalf("query = %q", query)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"jobs", "finished", "since", "2026-03-01", "12:00", "UTC"},
		{"TENANT", "JOBS", "UNPRICED", "COST", "USD"},
		{"acme", "5", "0", "3.0000"},
		{"globex", "2", "1", "0.5000"},
		{"TOTAL", "7", "1", "3.5000"},
	}
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}

	out.Reset()
	if code := runCLI(t.Context(), []string{"costs", "--api", srv.URL, "--operator-token", "op"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "TENANT  FLEET") || !strings.Contains(out.String(), "acme    video") || query != "since=24h" {
		t.Fatalf("default grouping:\n%s (query %q)", out.String(), query)
	}
	if code := runCLI(t.Context(), []string{"costs", "--api", srv.URL, "--by", "colour"}, &out, &errOut); code != 2 {
		t.Fatalf("--by colour: exit %d", code)
	}
}

// The Spot pools' volumes print after the jobs' total, each fleet's for the
// window and a day, apart from it.
func TestCostsPrintsTheSpotPoolsVolumes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"since":"2026-03-01T12:00:00Z","total_usd":1,"groups":[
			{"tenant_id":"acme","fleet_slug":"video","workflow_id":"upscale","jobs":1,"unpriced":0,"cost_usd":1}],
			"pool_volumes":[{"fleet_slug":"video","instances":12,"volume_gb":60,"usd_per_day":1.893699,"usd":1.972603}]}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"costs", "--api", srv.URL, "--operator-token", "op", "--by", "fleet"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := "fleet video: Spot pool volumes, 12 × 60 GB: $1.9726 since then, $1.8937 a day (not in TOTAL)"; lines[len(lines)-1] != want || !strings.HasPrefix(lines[len(lines)-2], "TOTAL") {
		t.Fatalf("output:\n%s\nwant the last line %q after the total", out.String(), want)
	}
}
