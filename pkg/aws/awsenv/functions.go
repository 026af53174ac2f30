package awsenv

import (
	"slices"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// Function is one of a stage's Lambda functions; its name is also its
// directory under functions/ and the suffix of its deployed name.
type Function string

// The stage's functions.
const (
	API          Function = "api"
	Dispatch     Function = "dispatch"
	Scaler       Function = "scaler"
	Interruption Function = "interruption"
	// Wait serves the API's wait route (GET /api/jobs/{job_id}/wait) with
	// the API's own handler, so that requests held open for seconds use a
	// concurrency of their own (fleet config wait_concurrency), never the
	// API function's, which serves the workers.
	Wait Function = "wait"
)

// Functions are every function of a stage, in the order the stack builds them.
var Functions = []Function{API, Dispatch, Scaler, Interruption, Wait}

// When says whether the stack sets a variable for a stage's config. nil
// (ByHand) means never: the variable is for running a function outside the
// stack (another endpoint, a secret kept in SSM), and only a person sets it.
type When func(*fleetconfig.Config) bool

// The conditions of Vars.
var (
	Always When = func(*fleetconfig.Config) bool { return true }
	ByHand When = nil
	// OnDemandGroups: some fleet has an On-Demand group, for its rung
	// (on_demand.fallback_after) or its bridge (bridge.pool).
	OnDemandGroups When = func(c *fleetconfig.Config) bool {
		return slices.ContainsFunc(c.Fleets, func(f fleetconfig.Fleet) bool { return f.OnDemand.Enabled() || f.Bridge.Enabled() })
	}
	// FleetSecrets: some fleet has accept_secret, a secret of its own.
	FleetSecrets When = func(c *fleetconfig.Config) bool {
		return slices.ContainsFunc(c.Fleets, func(f fleetconfig.Fleet) bool { return f.AcceptSecret })
	}
	// Webhooks: webhooks.allowed_hosts is not empty.
	Webhooks When = func(c *fleetconfig.Config) bool { return len(c.Webhooks.AllowedHosts) > 0 }
)

// Var declares one environment variable: which functions read it and when
// the stack sets it.
type Var struct {
	Name string
	By   []Function
	When When
}

var all = Functions

// Vars is the one declaration of the functions' environment. The CDK app
// (infra) sets on each function exactly the variables declared for it whose
// When holds for the stage's config, and refuses to synthesize one that it
// has no value for; the Lambda loader (pkg/service/system) may read only the
// variables declared for its function, and panics on any other. A name may
// have several rows when functions need it under different conditions.
//
// To add a variable: add its constant above and one row here; give its value
// in infra's environment (infra/stack.go, build.env) unless it is ByHand; and
// read it in the loader with Lambda.Lookup or Lambda.Require.
// infra's TestEnvironmentIsWhatEachFunctionReads synthesizes every shipped
// config and its variants and starts each function with exactly its
// template's environment: a variable read but not set, or set but not read,
// fails it.
var Vars = []Var{
	{EnvStage, all, Always},
	{EnvConfigFile, all, Always},
	{EnvTable, all, Always},
	{EnvLogLevel, all, Always},
	{EnvSubmitQueueURL, []Function{API, Wait}, Always},
	{EnvBucket, []Function{API, Wait}, Always},
	{EnvEventBus, []Function{API, Wait, Scaler}, Always},
	{EnvConsoleKeyARN, []Function{API, Wait}, Always},
	// The API admits an attested registration into a fleet from the fleet's
	// own worker role, on an instance of the fleet's groups, and a
	// registration with a secret only into a fleet that accepts one.
	{EnvWorkerRoles, []Function{API, Wait}, Always},
	{EnvFleetSecrets, []Function{API, Wait}, FleetSecrets},
	{EnvSTSEndpoint, []Function{API, Wait}, ByHand},
	// The scaler delivers job callbacks, signed with the webhook key.
	{EnvWebhookKeyARN, []Function{Scaler}, Webhooks},
	{EnvFleetGroups, []Function{API, Wait, Dispatch, Scaler}, Always},
	// Dispatch wakes a fleet's On-Demand group and starts bridges in it; the
	// scaler climbs to it; the API admits attested workers on its instances.
	{EnvFleetOnDemandGroups, []Function{API, Wait, Dispatch, Scaler}, OnDemandGroups},
	{EnvSubnets, []Function{Scaler}, Always},
	{EnvDynamoDBEndpoint, all, ByHand},
	{EnvSQSEndpoint, all, ByHand},
	{EnvS3Endpoint, all, ByHand},
	{EnvSSMEndpoint, all, ByHand},
	{EnvAutoScalingEndpoint, all, ByHand},
	{EnvEventBridgeEndpoint, all, ByHand},
	{EnvEC2Endpoint, all, ByHand},
	{EnvSecretsManagerEndpoint, all, ByHand},
}

// Reads reports whether fn is declared to read the variable name.
func Reads(fn Function, name string) bool {
	for _, v := range Vars {
		if v.Name == name && slices.Contains(v.By, fn) {
			return true
		}
	}
	return false
}

// StackSets returns the variables the stack sets on fn for cfg, sorted.
func StackSets(fn Function, cfg *fleetconfig.Config) []string {
	var out []string
	for _, v := range Vars {
		if v.When != nil && slices.Contains(v.By, fn) && v.When(cfg) && !slices.Contains(out, v.Name) {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ByHandFor reports whether fn reads name and the stack never sets it
// for fn: a variable for running the function outside the stack.
func ByHandFor(fn Function, name string) bool {
	found := false
	for _, v := range Vars {
		if v.Name == name && slices.Contains(v.By, fn) {
			if v.When != nil {
				return false
			}
			found = true
		}
	}
	return found
}
