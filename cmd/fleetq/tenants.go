//go:build !agent

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("tenants", "manage tenants' API keys (create, shown once; list; revoke) and which IAM principals act for them", runTenants)
}

var tenantsUsage = `usage: fleetq tenants keys <create|list|revoke> [flags]
       fleetq tenants principals <add|list|remove> [flags]

  create --tenant T [--name N] [--expires-in 720h]
         a new API key for tenant T (POST /api/admin/keys). It is printed once, alone on
         stdout: store it now; fleetq keeps only its SHA-256.
  list [--tenant T]
         the keys (GET /api/admin/keys): id, tenant, name, state, created, expires, last used
  revoke KEY_ID
         revoke a key for good (POST /api/admin/keys/{key_id}/revoke); KEY_ID is the id
         or the prefix fqk1.<id> that list shows

  principals add (--tenant T | --operator) ARN
         the IAM role or user ARN acts for tenant T (or as an operator) on the producer
         routes from its next request on (POST /api/admin/principals); no deploy
  principals list
         every mapped principal (GET /api/admin/principals): the table's and the stage config's
  principals remove ARN
         the principal acts for nobody from its next request on (POST /api/admin/principals/remove)

Every subcommand takes --api and --operator-token (or SigV4 with the AWS credentials),
and --json to print the API's JSON answer instead of a table.
`

func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || (args[0] != "keys" && args[0] != "principals") {
		fmt.Fprint(stderr, tenantsUsage)
		return 2
	}
	if args[0] == "principals" {
		return runPrincipals(ctx, args[1], args[2:], stdout, stderr)
	}
	sub, args := args[1], args[2:]
	fs := flag.NewFlagSet("fleetq tenants keys "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tenantsUsage); fmt.Fprintln(stderr); fs.PrintDefaults() }
	c := operatorFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	var run func() error
	switch sub {
	case "create":
		var req wire.CreateKeyRequest
		expires := fs.Duration("expires-in", 0, "the key expires this long after now (0: never)")
		fs.StringVar(&req.TenantID, "tenant", "", "the tenant the key acts for (required)")
		fs.StringVar(&req.Name, "name", "", "what the key is for")
		run = func() error {
			if req.TenantID == "" {
				return usageError("--tenant is required")
			}
			if *expires < 0 || *expires%time.Second != 0 {
				return usageError("--expires-in must be whole seconds, 0 or more")
			}
			req.ExpiresInSeconds = int64(*expires / time.Second)
			var a wire.CreateKeyResponse
			if err := c.send(ctx, http.MethodPost, wire.PathAdminKeys, req, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			fmt.Fprintf(stderr, "API key %s for tenant %s: shown only now, store it; producers send it as Authorization: Bearer <key>\n", a.APIKey.Prefix, a.APIKey.TenantID)
			fmt.Fprintln(stdout, a.Key)
			return nil
		}
	case "list":
		tenant := fs.String("tenant", "", "only this tenant's keys")
		run = func() error {
			path := wire.PathAdminKeys
			if *tenant != "" {
				path += "?tenant=" + url.QueryEscape(*tenant)
			}
			var a wire.KeysResponse
			if err := c.send(ctx, http.MethodGet, path, nil, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tTENANT\tNAME\tSTATE\tCREATED\tEXPIRES\tLAST USED")
			for _, k := range a.Keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Prefix, k.TenantID, orDash(k.Name), k.State, timeOrDash(k.CreatedAt), timeOrDash(k.ExpiresAt), timeOrDash(k.LastUsedAt))
			}
			return tw.Flush()
		}
	case "revoke":
		run = func() error {
			if fs.NArg() != 1 {
				return usageError("give exactly one key id (flags go before it)")
			}
			id := strings.TrimPrefix(fs.Arg(0), "fqk1.")
			var a wire.KeyResponse
			path := strings.Replace(wire.PathAdminKeyRevoke, "{key_id}", url.PathEscape(id), 1)
			if err := c.send(ctx, http.MethodPost, path, wire.Empty{}, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			fmt.Fprintf(stdout, "%s  %s\n", a.APIKey.Prefix, a.APIKey.State)
			return nil
		}
	default:
		fmt.Fprintf(stderr, "fleetq tenants keys: unknown subcommand %q\n\n%s", sub, tenantsUsage)
		return 2
	}
	return finish(fs, args, stderr, "tenants keys "+sub, func() (int, error) { return 0, run() })
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *string) string {
	if t == nil {
		return "-"
	}
	return *t
}

// runPrincipals is fleetq tenants principals: which IAM principals act for
// which tenant, kept in the table, changed without a deploy.
func runPrincipals(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq tenants principals "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tenantsUsage); fmt.Fprintln(stderr); fs.PrintDefaults() }
	c := operatorFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	arn := func() (string, error) {
		if fs.NArg() != 1 {
			return "", usageError("give exactly one role or user ARN (flags go before it)")
		}
		return fs.Arg(0), nil
	}
	show := func(a wire.PrincipalResponse, verb string) {
		who := "tenant " + a.Principal.TenantID
		if a.Principal.Operator {
			who = "the operators"
		}
		fmt.Fprintf(stdout, "%s %s %s\n", a.Principal.PrincipalARN, verb, who)
	}
	var run func() error
	switch sub {
	case "add":
		var req wire.MapPrincipalRequest
		fs.StringVar(&req.TenantID, "tenant", "", "the tenant the principal acts for")
		fs.BoolVar(&req.Operator, "operator", false, "the principal acts as an operator (every tenant) on the producer routes")
		run = func() error {
			var err error
			if req.PrincipalARN, err = arn(); err != nil {
				return err
			}
			if (req.TenantID == "") == !req.Operator {
				return usageError("give one of --tenant or --operator")
			}
			var a wire.PrincipalResponse
			if err := c.send(ctx, http.MethodPost, wire.PathAdminPrincipals, req, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			show(a, "acts for")
			return nil
		}
	case "list":
		run = func() error {
			var a wire.PrincipalsResponse
			if err := c.send(ctx, http.MethodGet, wire.PathAdminPrincipals, nil, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PRINCIPAL\tACTS FOR\tSOURCE\tSINCE")
			for _, p := range a.Principals {
				who := p.TenantID
				if p.Operator {
					who = "(operator)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.PrincipalARN, who, p.Source, timeOrDash(p.CreatedAt))
			}
			return tw.Flush()
		}
	case "remove":
		run = func() error {
			principal, err := arn()
			if err != nil {
				return err
			}
			var a wire.PrincipalResponse
			if err := c.send(ctx, http.MethodPost, wire.PathAdminPrincipalRemove, wire.RemovePrincipalRequest{PrincipalARN: principal}, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			show(a, "no longer acts for")
			return nil
		}
	default:
		fmt.Fprintf(stderr, "fleetq tenants principals: unknown subcommand %q\n\n%s", sub, tenantsUsage)
		return 2
	}
	return finish(fs, args, stderr, "tenants principals "+sub, func() (int, error) { return 0, run() })
}
