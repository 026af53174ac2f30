package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// keysView is the API keys page: the tenant it is filtered by, the keys,
// and, right after a key was created, the key itself — shown on this one
// answer only (the store keeps its digest).
type keysView struct {
	Tenant  string
	Keys    []wire.APIKey
	Created *createdKey
}

// createdKey is a key just minted.
type createdKey struct {
	Key string
	wire.APIKey
}

// maxKeyDays bounds the form's expiry in days; the API checks the
// resulting lifetime against its own bound.
const maxKeyDays = 3660

func (c *Console) keys(w http.ResponseWriter, r *http.Request, sc session) {
	c.renderKeys(w, r, sc, http.StatusOK, r.URL.Query().Get("tenant"), nil)
}

// renderKeys renders the keys page of one tenant ("" for all).
func (c *Console) renderKeys(w http.ResponseWriter, r *http.Request, sc session, status int, tenant string, created *createdKey) {
	v, err := c.newView(r, sc, "API keys", "keys")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ks, err := c.ops.Keys(r.Context(), tenant)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v.Data = keysView{Tenant: tenant, Keys: ks, Created: created}
	c.render(w, status, "keys", v)
}

// createKey mints a key for the form's tenant, with its name and an expiry
// in days (empty or 0: never), and answers the page with the key shown.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request, sc session) {
	req := wire.CreateKeyRequest{TenantID: strings.TrimSpace(r.PostForm.Get("tenant_id")), Name: r.PostForm.Get("name")}
	if d := strings.TrimSpace(r.PostForm.Get("expires_in_days")); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > maxKeyDays {
			c.fail(w, r, &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument,
				Message: "field \"expires_in_days\": a whole number of days from 0 (never) to " + strconv.Itoa(maxKeyDays)})
			return
		}
		req.ExpiresInSeconds = int64(n) * 24 * 3600
	}
	key, k, err := c.ops.CreateKey(r.Context(), sc.Operator, req)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.renderKeys(w, r, sc, http.StatusCreated, k.TenantID, &createdKey{Key: key, APIKey: k})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, sc session) {
	k, err := c.ops.RevokeKey(r.Context(), sc.Operator, r.PathValue("key_id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, PathKeys+"?tenant="+url.QueryEscape(k.TenantID), http.StatusSeeOther)
}
