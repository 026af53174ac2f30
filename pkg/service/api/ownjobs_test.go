package api_test

import (
	"net/url"
	"slices"
	"testing"
)

// ownJobs follows GET /api/jobs's cursors from the first page to the last
// with the credential auth and answers the ids listed.
func (h *harness) ownJobs(auth, query string) []string {
	h.t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			h.t.Fatal("GET /api/jobs: more than 100 pages")
		}
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := h.do("GET", "/api/jobs?"+q, auth, nil)
		h.want(r, 200, "")
		for _, j := range r.body["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["job_id"].(string))
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			return ids
		}
		cursor = next
	}
}

func (h *harness) newKey(tenant string) string {
	h.t.Helper()
	r := h.do("POST", "/api/admin/keys", "op", map[string]any{"tenant_id": tenant})
	h.want(r, 201, "")
	return r.body["key"].(string)
}

func TestListOwnJobsShowsOnlyTheTenantsJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme, globex := h.newKey("acme"), h.newKey("globex")
	var mine []string
	for _, k := range []string{"a", "b", "c"} {
		mine = append(mine, h.submit(map[string]any{"job_id": k, "tenant_id": "acme", "workflow_id": "wf-a"}))
	}
	mine = append(mine, h.submit(map[string]any{"job_id": "d", "tenant_id": "acme", "workflow_id": "wf-c"}))
	h.submit(map[string]any{"job_id": "a", "tenant_id": "globex", "workflow_id": "wf-a"})
	h.submit(map[string]any{"job_id": "x", "tenant_id": "globex", "workflow_id": "wf-c"})
	slices.Sort(mine)

	for _, q := range []string{"limit=1", "limit=2&status=queued", "limit=100", "tenant_id=acme"} {
		got := h.ownJobs(acme, q)
		slices.Sort(got)
		if !slices.Equal(got, mine) {
			t.Fatalf("acme's key, %s: listed %v, want %v", q, got, mine)
		}
	}
	if got := h.ownJobs("op", "tenant_id=acme&limit=3"); len(got) != len(mine) {
		t.Fatalf("operator for acme: listed %v, want %v", got, mine)
	}
	if got := h.ownJobs(acme, "status=succeeded"); len(got) != 0 {
		t.Fatalf("acme's succeeded jobs: %v, want none", got)
	}
	if got := h.ownJobs(globex, "limit=5"); len(got) != 2 {
		t.Fatalf("globex's key listed %v, want its two jobs", got)
	}

	// One page: newest change first.
	r := h.do("GET", "/api/jobs?status=queued&limit=100", acme, nil)
	h.want(r, 200, "")
	var times []string
	for _, j := range r.body["jobs"].([]any) {
		times = append(times, j.(map[string]any)["updated_at"].(string))
	}
	if !slices.IsSortedFunc(times, func(a, b string) int { return -compare(a, b) }) {
		t.Fatalf("page not newest first: %v", times)
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestListOwnJobsRefusesOthersAndBadQueries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.newKey("acme")
	h.submit(map[string]any{"job_id": "a", "tenant_id": "acme", "workflow_id": "wf-a"})
	worker := h.register("w-list", "gpu")

	h.want(h.do("GET", "/api/jobs?tenant_id=globex", acme, nil), 403, "permission_denied")
	h.want(h.do("GET", "/api/jobs", worker, nil), 401, "unauthenticated")
	h.want(h.do("GET", "/api/jobs", "", nil), 401, "unauthenticated")
	h.want(h.do("GET", "/api/jobs", "op", nil), 400, "invalid_argument") // an operator names the tenant

	first := h.do("GET", "/api/jobs?limit=1", acme, nil)
	h.want(first, 200, "")
	cursor, _ := first.body["next_cursor"].(string)
	if cursor == "" {
		t.Fatal("a first page of one entry over every partition answered no cursor")
	}
	for _, q := range []string{
		"status=running", "status=QUEUED", "limit=0", "limit=101", "limit=ten",
		"cursor=not-a-cursor", "cursor=" + url.QueryEscape(cursor[:len(cursor)-3]),
		"status=dead&cursor=" + url.QueryEscape(cursor), // answered for every status
	} {
		h.want(h.do("GET", "/api/jobs?"+q, acme, nil), 400, "invalid_argument")
	}
	if got := h.ownJobs(acme, "limit=1"); len(got) != 1 {
		t.Fatalf("after the refusals acme lists %v, want its one job", got)
	}
}
