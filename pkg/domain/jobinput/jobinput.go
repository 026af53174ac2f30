package jobinput

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Limits on what a job may name.
const (
	MaxInputs   = 32
	MaxOutputs  = 16
	MaxKeyBytes = 1024
)

// namePattern is what an input or output name may look like: it becomes the
// last segment of an output key and a key of input_urls.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// TenantPrefix is where a tenant's objects live.
func TenantPrefix(tenant string) string { return "tenants/" + tenant + "/" }

// OutputKey is where a job's output (or its named output) is written.
func OutputKey(tenant, jobID, name string) string {
	k := TenantPrefix(tenant) + "jobs/" + jobID + "/output"
	if name != "" {
		k += "/" + name
	}
	return k
}

// LogKey is where the agent uploads the tail of a run's runner output
// (stdout and stderr). A run is one lease of the job, numbered from 1 by
// Runs: a run that a preemption gave back keeps its log, and the run that
// takes the attempt again gets the next number. The key still says
// "attempt", as it did when only spent attempts were numbered: for a job
// never preempted the two numbers are the same.
func LogKey(tenant, jobID string, run int) string {
	return TenantPrefix(tenant) + "jobs/" + jobID + "/logs/attempt-" + strconv.Itoa(run) + ".log"
}

// Runs is how many times a job has been leased since it was submitted or an
// operator last retried it: every lease spends an attempt, and every
// preemption gives one back and counts itself, so their sum only grows. A
// leased job's current run is Runs.
func Runs(attempts, preemptions int) int { return attempts + preemptions }

// Refs are the objects a job's input names.
type Refs struct {
	Inputs  map[string]string `json:"input_keys"`
	Outputs []string          `json:"outputs"`
}

// ParseRefs reads input_keys and outputs from a job's input document and
// checks them against the tenant: every key under the tenant's prefix, no
// path tricks, names that are safe as key segments. The error says what is
// wrong in the submission's terms.
func ParseRefs(tenant string, input json.RawMessage) (Refs, error) {
	var r Refs
	if len(input) == 0 || string(input) == "null" {
		return r, nil
	}
	var doc struct {
		Inputs  json.RawMessage `json:"input_keys"`
		Outputs json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(input, &doc); err != nil {
		return r, nil // not an object: the submission's own checks say so
	}
	if len(doc.Inputs) > 0 && string(doc.Inputs) != "null" {
		if err := json.Unmarshal(doc.Inputs, &r.Inputs); err != nil {
			return r, fmt.Errorf(`field "input.input_keys": must be an object of names to object keys`)
		}
	}
	if len(doc.Outputs) > 0 && string(doc.Outputs) != "null" {
		if err := json.Unmarshal(doc.Outputs, &r.Outputs); err != nil {
			return r, fmt.Errorf(`field "input.outputs": must be a list of output names`)
		}
	}
	if len(r.Inputs) > MaxInputs {
		return r, fmt.Errorf(`field "input.input_keys": at most %d inputs, got %d`, MaxInputs, len(r.Inputs))
	}
	if len(r.Outputs) > MaxOutputs {
		return r, fmt.Errorf(`field "input.outputs": at most %d outputs, got %d`, MaxOutputs, len(r.Outputs))
	}
	prefix := TenantPrefix(tenant)
	for name, key := range r.Inputs {
		if !namePattern.MatchString(name) {
			return r, fmt.Errorf(`field "input.input_keys": name %q must be 1-128 letters, digits, '.', '_' or '-'`, name)
		}
		if len(key) > MaxKeyBytes || !strings.HasPrefix(key, prefix) || len(key) == len(prefix) {
			return r, fmt.Errorf(`field "input.input_keys.%s": key %q must be an object under this tenant's prefix %q`, name, key, prefix)
		}
		if path.Clean("/"+key) != "/"+key || strings.Contains(key, "//") {
			return r, fmt.Errorf(`field "input.input_keys.%s": key %q must not contain "..", "." or empty segments`, name, key)
		}
	}
	seen := map[string]bool{}
	for _, name := range r.Outputs {
		if !namePattern.MatchString(name) || seen[name] {
			return r, fmt.Errorf(`field "input.outputs": %q must be a unique name of 1-128 letters, digits, '.', '_' or '-'`, name)
		}
		seen[name] = true
	}
	return r, nil
}
