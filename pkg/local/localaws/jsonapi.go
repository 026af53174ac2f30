package localaws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// JSONAPI serves the AWS JSON 1.1 actions a fleetq function calls besides
// DynamoDB and SQS: Secrets Manager GetSecretValue and SSM GetParameter
// (the fleet secret) and EventBridge PutEvents (job lifecycle events). The Lambda constructors run
// against it in tests, through the real SDK clients, exactly as in AWS.
// For `fleetq doctor` it also serves Secrets Manager DescribeSecret and
// Service Quotas GetServiceQuota.
type JSONAPI struct {
	*Server

	mu      sync.Mutex
	params  map[string]string
	secrets map[string]secretVersion
	events  []PutEventsEntry
	quotas  map[string]float64 // by service code + "/" + quota code
}

// secretVersion is a secret's AWSCURRENT value, its version number and
// when it was stored, with the version before it (AWSPREVIOUS), as
// put-secret-value leaves them.
type secretVersion struct {
	value    string
	version  int
	created  time.Time
	previous *secretVersion
}

// PutEventsEntry is one event a PutEvents call delivered.
type PutEventsEntry struct {
	Source       string `json:"Source"`
	DetailType   string `json:"DetailType"`
	Detail       string `json:"Detail"`
	EventBusName string `json:"EventBusName"`
}

// StartJSONAPI starts the server on addr ("" for any loopback port).
func StartJSONAPI(addr string) (*JSONAPI, error) {
	a := &JSONAPI{params: map[string]string{}, secrets: map[string]secretVersion{}, quotas: map[string]float64{}}
	srv, err := serve(addr, a)
	if err != nil {
		return nil, err
	}
	a.Server = srv
	return a, nil
}

// PutParameter stores an SSM parameter's value.
func (a *JSONAPI) PutParameter(name, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.params[name] = value
}

// PutSecretValue stores a new current version of the Secrets Manager
// secret id (its ARN or name, as callers will ask for it), created now; the
// version it replaces becomes AWSPREVIOUS.
func (a *JSONAPI) PutSecretValue(id, value string) { a.PutSecretValueAt(id, value, time.Now()) }

// PutSecretValueAt is PutSecretValue with the new version's creation time.
func (a *JSONAPI) PutSecretValueAt(id, value string, created time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := secretVersion{value: value, version: 1, created: created}
	if old, ok := a.secrets[id]; ok {
		old.previous = nil
		v.version, v.previous = old.version+1, &old
	}
	a.secrets[id] = v
}

// PutServiceQuota sets the applied value of a Service Quotas quota, e.g.
// ("ec2", "L-3819A6DF", 32). A quota never set answers
// NoSuchResourceException.
func (a *JSONAPI) PutServiceQuota(service, code string, value float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.quotas[service+"/"+code] = value
}

// Events returns every event PutEvents accepted, oldest first.
func (a *JSONAPI) Events() []PutEventsEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]PutEventsEntry(nil), a.events...)
}

// secret is the stored secret named id, or Secrets Manager's not-found
// answer written to w.
func (a *JSONAPI) secret(w http.ResponseWriter, id string) (secretVersion, bool) {
	a.mu.Lock()
	v, ok := a.secrets[id]
	a.mu.Unlock()
	if !ok {
		writeJSONError(w, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	return v, ok
}

// ServeHTTP answers one JSON 1.1 request, routed by its X-Amz-Target.
func (a *JSONAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	switch target {
	case "AmazonSSM.GetParameter":
		var in struct{ Name string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" {
			writeJSONError(w, "ValidationException", "Name is required")
			return
		}
		a.mu.Lock()
		v, ok := a.params[in.Name]
		a.mu.Unlock()
		if !ok {
			writeJSONError(w, "ParameterNotFound", fmt.Sprintf("Parameter %s not found.", in.Name))
			return
		}
		writeJSON(w, map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "SecureString", "Value": v, "Version": 1}})
	case "secretsmanager.GetSecretValue":
		var in struct{ SecretId, VersionStage, VersionId string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.SecretId == "" {
			writeJSONError(w, "InvalidParameterException", "SecretId is required")
			return
		}
		if (in.VersionStage != "" && in.VersionStage != "AWSCURRENT" && in.VersionStage != "AWSPREVIOUS") || in.VersionId != "" {
			writeJSONError(w, "InvalidRequestException", "only the AWSCURRENT and AWSPREVIOUS versions are served")
			return
		}
		v, ok := a.secret(w, in.SecretId)
		if !ok {
			return
		}
		stage := "AWSCURRENT"
		if in.VersionStage == "AWSPREVIOUS" {
			if v.previous == nil {
				writeJSONError(w, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: AWSPREVIOUS")
				return
			}
			v, stage = *v.previous, "AWSPREVIOUS"
		}
		writeJSON(w, map[string]any{"ARN": in.SecretId, "Name": in.SecretId, "SecretString": v.value,
			"VersionId": fmt.Sprintf("v%d", v.version), "VersionStages": []string{stage},
			"CreatedDate": float64(v.created.UnixMilli()) / 1000})
	case "secretsmanager.DescribeSecret":
		var in struct{ SecretId string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.SecretId == "" {
			writeJSONError(w, "InvalidParameterException", "SecretId is required")
			return
		}
		v, ok := a.secret(w, in.SecretId)
		if !ok {
			return
		}
		stages := map[string][]string{fmt.Sprintf("v%d", v.version): {"AWSCURRENT"}}
		if v.previous != nil {
			stages[fmt.Sprintf("v%d", v.previous.version)] = []string{"AWSPREVIOUS"}
		}
		writeJSON(w, map[string]any{"ARN": in.SecretId, "Name": in.SecretId, "VersionIdsToStages": stages})
	case "ServiceQuotasV20190624.GetServiceQuota":
		var in struct{ ServiceCode, QuotaCode string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ServiceCode == "" || in.QuotaCode == "" {
			writeJSONError(w, "IllegalArgumentException", "ServiceCode and QuotaCode are required")
			return
		}
		a.mu.Lock()
		v, ok := a.quotas[in.ServiceCode+"/"+in.QuotaCode]
		a.mu.Unlock()
		if !ok {
			writeJSONError(w, "NoSuchResourceException", fmt.Sprintf("The request failed because the specified quota %s does not exist.", in.QuotaCode))
			return
		}
		writeJSON(w, map[string]any{"Quota": map[string]any{"ServiceCode": in.ServiceCode, "QuotaCode": in.QuotaCode,
			"Value": v, "Unit": "None", "Adjustable": true, "GlobalQuota": false}})
	case "AWSEvents.PutEvents":
		var in struct{ Entries []PutEventsEntry }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Entries) == 0 || len(in.Entries) > 10 {
			writeJSONError(w, "ValidationException", "Entries must hold 1 to 10 events")
			return
		}
		out := make([]map[string]string, len(in.Entries))
		a.mu.Lock()
		for i, e := range in.Entries {
			a.events = append(a.events, e)
			out[i] = map[string]string{"EventId": fmt.Sprintf("local-%d", len(a.events))}
		}
		a.mu.Unlock()
		writeJSON(w, map[string]any{"FailedEntryCount": 0, "Entries": out})
	default:
		writeJSONError(w, "UnknownOperationException", "unknown operation "+strings.TrimSpace(target))
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONError writes an AWS JSON 1.1 error: the code in __type, HTTP 400.
func writeJSONError(w http.ResponseWriter, code, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
}
