package api

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// PrincipalStore is what the principal mappings need of the store: who an
// IAM principal acts for, kept beside the API keys so it changes without
// a deploy.
type PrincipalStore interface {
	MapPrincipal(ctx context.Context, p tenant.PrincipalMapping) (tenant.PrincipalMapping, error)
	GetPrincipal(ctx context.Context, key string) (tenant.PrincipalMapping, bool, error)
	ListPrincipals(ctx context.Context) ([]tenant.PrincipalMapping, error)
	UnmapPrincipal(ctx context.Context, key string) (tenant.PrincipalMapping, error)
}

// callerFor says who an IAM caller is on the producer routes: the stage
// config's mapping first (tenants[].principals, operators), then the
// table's (POST /api/admin/principals): one tenant's principal, an
// operator, or nobody (false). The table's answer is one strongly
// consistent GetItem, so a removal holds at once.
func (s *server) callerFor(ctx context.Context, arn string) (fleetconfig.Caller, bool, error) {
	if who, mapped := s.Config.CallerFor(arn); mapped {
		return who, true, nil
	}
	p, err := tenant.ParseCaller(arn)
	if err != nil {
		return fleetconfig.Caller{}, false, nil
	}
	m, found, err := s.Store.GetPrincipal(ctx, p.Key())
	if err != nil || !found {
		return fleetconfig.Caller{}, false, err
	}
	return fleetconfig.Caller{Tenant: m.Tenant, Operator: m.Operator}, true, nil
}

// mapPrincipal is POST /api/admin/principals: an IAM role or user acts for
// one tenant (or as an operator) on the producer routes from now on.
func (s *server) mapPrincipal(w http.ResponseWriter, r *http.Request) {
	var req wire.MapPrincipalRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := tenant.ParseConfigPrincipal(req.PrincipalARN)
	if err != nil {
		s.writeError(w, r, invalid("field \"principal_arn\": %v", err))
		return
	}
	switch {
	case req.Operator && req.TenantID != "":
		s.writeError(w, r, invalid("give either tenant_id or operator, not both: a principal acts for one tenant, or as an operator"))
		return
	case !req.Operator:
		if err := tenant.CheckID("tenant_id", req.TenantID); err != nil {
			s.writeError(w, r, invalid("%v (or operator: true)", err))
			return
		}
	}
	if err := s.configListed(req.PrincipalARN); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !req.Operator && s.isCaller(r, p) {
		s.writeError(w, r, conflict("principal %s is the credential of this request: as a tenant's it would lose the operator routes; map another principal", req.PrincipalARN))
		return
	}
	m, err := s.Store.MapPrincipal(r.Context(), tenant.PrincipalMapping{Key: p.Key(), ARN: req.PrincipalARN, Tenant: req.TenantID,
		Operator: req.Operator, CreatedMS: s.Clock.Now().UnixMilli(), CreatedBy: operatorOf(r)})
	var mapped *tenant.PrincipalMappedError
	if errors.As(err, &mapped) {
		s.writeError(w, r, conflict("%v", err))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "IAM principal mapped", "principal", m.ARN, "tenant_id", m.Tenant, "as_operator", m.Operator, "operator", operatorOf(r))
	wire.WriteJSON(w, http.StatusOK, wire.PrincipalResponse{Principal: viewPrincipal(m)})
}

// listPrincipals is GET /api/admin/principals: the config's mappings and
// the table's.
func (s *server) listPrincipals(w http.ResponseWriter, r *http.Request) {
	var out []wire.PrincipalMapping
	for _, t := range s.Config.Tenants {
		for _, arn := range t.Principals {
			out = append(out, wire.PrincipalMapping{PrincipalARN: arn, TenantID: t.ID, Source: "config"})
		}
	}
	for _, arn := range s.Config.Operators {
		out = append(out, wire.PrincipalMapping{PrincipalARN: arn, Operator: true, Source: "config"})
	}
	ms, err := s.Store.ListPrincipals(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Key < ms[j].Key })
	for _, m := range ms {
		out = append(out, viewPrincipal(m))
	}
	if out == nil {
		out = []wire.PrincipalMapping{}
	}
	wire.WriteJSON(w, http.StatusOK, wire.PrincipalsResponse{Principals: out})
}

// removePrincipal is POST /api/admin/principals/remove: the principal acts
// for nobody from the next request on.
func (s *server) removePrincipal(w http.ResponseWriter, r *http.Request) {
	var req wire.RemovePrincipalRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := tenant.ParseConfigPrincipal(req.PrincipalARN)
	if err != nil {
		s.writeError(w, r, invalid("field \"principal_arn\": %v", err))
		return
	}
	if err := s.configListed(req.PrincipalARN); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.Store.UnmapPrincipal(r.Context(), p.Key())
	if errors.Is(err, fault.ErrNotFound) {
		s.writeError(w, r, notFound("principal %s: not mapped", req.PrincipalARN))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "IAM principal unmapped", "principal", m.ARN, "tenant_id", m.Tenant, "operator", operatorOf(r))
	wire.WriteJSON(w, http.StatusOK, wire.PrincipalResponse{Principal: viewPrincipal(m)})
}

// configListed refuses to change a principal the stage config maps: the
// config is built into the functions, so only a deploy changes it.
func (s *server) configListed(arn string) error {
	if who, listed := s.Config.CallerFor(arn); listed {
		what := "as an operator"
		if !who.Operator {
			what = "for tenant " + who.Tenant
		}
		return conflict("principal %s acts %s in the stage config (%s); change it there and deploy", arn, what, s.Config.Source())
	}
	return nil
}

// isCaller reports whether p is the IAM identity of the request.
func (s *server) isCaller(r *http.Request, p tenant.Principal) bool {
	arn, ok := auth.IAMCaller(r)
	if !ok {
		return false
	}
	c, err := tenant.ParseCaller(arn)
	return err == nil && c.Key() == p.Key()
}

func viewPrincipal(m tenant.PrincipalMapping) wire.PrincipalMapping {
	return wire.PrincipalMapping{PrincipalARN: m.ARN, TenantID: m.Tenant, Operator: m.Operator, Source: "table",
		CreatedAt: rfc3339(time.UnixMilli(m.CreatedMS))}
}
