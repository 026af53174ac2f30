package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// caller is who a producer route acts for: one tenant, or an operator
// (every tenant).
type caller struct {
	// tenant is the tenant the credential acts for; "" for an operator.
	tenant string
	// who names the credential in logs: an IAM ARN, an API key's public
	// id, or the operator's name. Never a secret.
	who string
}

func (c caller) operator() bool { return c.tenant == "" }

type callerCtxKey struct{}

// callerOf is the producer route's caller.
func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerCtxKey{}).(caller)
	return c
}

func permissionDenied(format string, args ...any) *wire.Error {
	return &wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied, Message: fmt.Sprintf(format, args...)}
}

// producer resolves a producer route's credential to one tenant or to an
// operator before anything else of the request is read:
//   - an API key (Authorization: Bearer fqk1.…) acts for its tenant;
//   - an IAM caller (API Gateway's IAM authorizer) acts for the tenant the
//     stage config, or else the table, maps its principal to, or as an
//     operator when either lists it so; any other IAM principal is refused
//     (403);
//   - otherwise the operator credential (the operator token outside AWS).
func (s *server) producer(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := s.resolveProducer(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), callerCtxKey{}, c)
		if c.operator() {
			ctx = context.WithValue(ctx, operatorCtxKey{}, c.who)
		}
		next(w, r.WithContext(ctx))
	}
}

func (s *server) resolveProducer(r *http.Request) (caller, error) {
	if t, ok := auth.BearerToken(r.Header.Get("Authorization")); ok && strings.HasPrefix(t, auth.APIKeyPrefix) {
		return s.authenticateKey(r.Context(), t)
	}
	if arn, ok := auth.IAMCaller(r); ok {
		who, mapped, err := s.callerFor(r.Context(), arn)
		switch {
		case err != nil:
			return caller{}, err
		case !mapped:
			s.log.WarnContext(r.Context(), "unmapped IAM principal on a producer route", "principal", arn, "path", r.URL.Path)
			return caller{}, permissionDenied("the IAM principal %s acts for no tenant of stage %s: an operator maps its role or user ARN to a tenant's principals "+
				"(fleetq tenants principals add --tenant <tenant> <arn>, or --operator), or lists it in the stage config's tenants[].principals or operators; "+
				"or call the key API with one of the tenant's API keys", arn, s.Config.Stage)
		case who.Operator:
			return caller{who: arn}, nil
		default:
			return caller{tenant: who.Tenant, who: arn}, nil
		}
	}
	who, err := s.Operator.AuthenticateOperator(r)
	if err != nil {
		if _, bearer := auth.BearerToken(r.Header.Get("Authorization")); bearer {
			// A bearer credential here is meant as an API key (the
			// operator's token is one only on the dev stack): say what a
			// key looks like, before anything is read.
			return caller{}, malformedKey()
		}
		return caller{}, err
	}
	return caller{who: who}, nil
}

// malformedKey answers a producer's bearer credential that cannot be an
// API key; it never repeats the credential.
func malformedKey() *wire.Error {
	return unauthenticated("the API key is malformed: keys look like " + auth.APIKeyPrefix + "<id>.<secret>, as fleetq tenants keys create prints them")
}

// refuseTenantCredential keeps a tenant's credential off the operator
// routes: an IAM principal the config or the table maps to a tenant is a
// producer, not an operator, whatever its IAM policy allows.
func (s *server) refuseTenantCredential(r *http.Request) error {
	if arn, ok := auth.IAMCaller(r); ok {
		who, mapped, err := s.callerFor(r.Context(), arn)
		if err != nil {
			return err
		}
		if mapped && !who.Operator {
			return permissionDenied("the IAM principal %s acts for tenant %s; operator routes need an operator's credential", arn, who.Tenant)
		}
	}
	return nil
}

// tenantFor is the tenant a request body names, checked against the
// caller: a tenant's credential acts only for its tenant (an empty field
// means the caller's), and an operator must name one.
func tenantFor(c caller, field, named string) (string, error) {
	if c.operator() {
		if err := tenant.CheckID(field, named); err != nil {
			return "", invalid("%v", err)
		}
		return named, nil
	}
	if named == "" || named == c.tenant {
		return c.tenant, nil
	}
	if err := tenant.CheckID(field, named); err != nil {
		return "", invalid("%v", err)
	}
	return "", permissionDenied("field %q: this credential acts for tenant %s only", field, c.tenant)
}

// jobIDFor is the job a path's {job_id} names for the caller: a tenant's
// ids are its own (tenant.JobID), so "render-1" and "acme:render-1" name
// the same job of tenant acme, and no id reaches another tenant's job.
// Operators name jobs by their full id.
func jobIDFor(c caller, id string) string {
	if c.operator() {
		return id
	}
	return tenant.JobID(c.tenant, id)
}

// jobNotFound is the answer for a job the caller may not see, the same as
// for one that does not exist.
func jobNotFound(id string) error {
	return notFound("job %s: not found", id)
}

// callerJob reads the job a producer route names, as its caller may see
// it: another tenant's job is not found.
func (s *server) callerJob(ctx context.Context, c caller, rawID string) (job.Job, error) {
	id := jobIDFor(c, rawID)
	j, err := s.Store.GetJob(ctx, id)
	if err != nil {
		if toError(err).Code == wire.CodeNotFound {
			return job.Job{}, jobNotFound(id)
		}
		return job.Job{}, err
	}
	if !c.operator() && j.TenantID != c.tenant {
		return job.Job{}, jobNotFound(id)
	}
	return j, nil
}

// isAPIKey reports whether a request's bearer credential is an API key.
func isAPIKey(r *http.Request) bool {
	t, ok := auth.BearerToken(r.Header.Get("Authorization"))
	return ok && strings.HasPrefix(t, auth.APIKeyPrefix)
}
