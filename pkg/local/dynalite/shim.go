package dynalite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// TokenWindow is how long a committed transaction's ClientRequestToken is
// remembered, as DynamoDB documents for TransactWriteItems.
const TokenWindow = 10 * time.Minute

const (
	targetPrefix   = "DynamoDB_20120810."
	errPrefix      = "com.amazonaws.dynamodb.v20120810#"
	amzJSON        = "application/x-amz-json-1.0"
	maxTransaction = 100
)

// Shim is an HTTP proxy in front of dynalite. It passes every call through
// unchanged except TransactWriteItems, which dynalite lacks, and serves that
// from dynalite's single-item calls: each action as one conditional
// PutItem, UpdateItem or DeleteItem that answers the item as it was before
// (ReturnValues ALL_OLD). When an action fails, the items written before
// it are restored from those answers, in reverse. One lock serialises every
// call through the shim, so no other call sees a transaction half done.
// (Letting single-item calls run side by side, with transactions alone,
// made the full-size soak about a fifth faster but let some of its polls
// wait over a minute: a poll that loses its claims tries the next
// candidates, each a transaction queued behind every other poller's.)
// Conditions, expressions, item sizes and everything a single write does are
// dynalite's; only the grouping is the shim's.
type Shim struct {
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	client   *http.Client
	clock    clock.Clock

	mu     sync.Mutex
	keys   map[string][]string // table -> key attribute names
	tokens map[string]committed
}

type committed struct {
	digest [32]byte
	at     time.Time
}

// NewShim returns a shim in front of the dynalite at upstream (its base URL).
func NewShim(upstream string, c clock.Clock) (*Shim, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("dynalite endpoint %q: %w", upstream, err)
	}
	return &Shim{
		upstream: u,
		proxy:    httputil.NewSingleHostReverseProxy(u),
		client:   &http.Client{Timeout: 30 * time.Second},
		clock:    c,
		keys:     map[string][]string{},
		tokens:   map[string]committed{},
	}, nil
}

// ServeHTTP serves one DynamoDB API call. dynalite ends its process on a
// request cut off mid-way (it throws on the aborted request), so the shim
// reads the whole call before it sends any of it, and a caller that goes
// away does not cancel what the shim has started: the call runs to its end
// and its answer is dropped, as DynamoDB finishes a call whose caller left.
func (s *Shim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	// A context of its own that the shim ends: the reverse proxy watches
	// the caller's connection instead when a context cannot end.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get("X-Amz-Target") != targetPrefix+"TransactWriteItems" {
		out := r.Clone(ctx)
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		s.proxy.ServeHTTP(w, out)
		return
	}
	c := caller{shim: s, auth: r.Header.Get("Authorization"), date: r.Header.Get("X-Amz-Date")}
	status, out := c.transactWrite(ctx, body)
	w.Header().Set("Content-Type", amzJSON)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// caller makes the single-item calls of one transaction, with the
// credentials' headers of the request it serves.
type caller struct {
	shim       *Shim
	auth, date string
}

// apiError is an error answer of DynamoDB's JSON protocol.
type apiError struct {
	status  int
	code    string // without the namespace
	message string
	body    []byte
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// call sends one operation to dynalite and decodes its answer into out.
func (c caller) call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.shim.upstream.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", amzJSON)
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("X-Amz-Date", c.date)
	resp, err := c.shim.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
			Msg     string `json:"Message"`
		}
		_ = json.Unmarshal(raw, &e)
		code := e.Type[strings.LastIndex(e.Type, "#")+1:]
		return &apiError{status: resp.StatusCode, code: code, message: e.Message + e.Msg, body: raw}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// object is a JSON object of the wire protocol, kept raw.
type object = map[string]json.RawMessage

// action is one member of a transaction.
type action struct {
	kind      string // Put, Update, Delete or ConditionCheck
	fields    object
	table     string
	key       object
	oldOnFail bool   // ReturnValuesOnConditionCheckFailure ALL_OLD
	before    object // the item before the transaction; nil when absent
}

func (c caller) transactWrite(ctx context.Context, body []byte) (int, []byte) {
	var in struct {
		TransactItems      []map[string]object
		ClientRequestToken string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errBody(http.StatusBadRequest, "SerializationException", err.Error())
	}
	if n := len(in.TransactItems); n == 0 || n > maxTransaction {
		return errBody(http.StatusBadRequest, "ValidationException",
			fmt.Sprintf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length between 1 and %d", maxTransaction))
	}
	s := c.shim
	digest := sha256.Sum256(body)
	now := s.clock.Now()
	if tok := in.ClientRequestToken; tok != "" {
		if prev, ok := s.tokens[tok]; ok && now.Sub(prev.at) < TokenWindow {
			if prev.digest != digest {
				return errBody(http.StatusBadRequest, "IdempotentParameterMismatchException",
					"The request uses the same client token as a previous, but non-identical request.")
			}
			return http.StatusOK, []byte("{}")
		}
	}
	actions := make([]*action, len(in.TransactItems))
	seen := map[string]bool{}
	for i, ti := range in.TransactItems {
		a, err := c.parse(ctx, ti)
		if err != nil {
			if ae, ok := err.(*apiError); ok {
				return ae.status, ae.body
			}
			return errBody(http.StatusBadRequest, "ValidationException", err.Error())
		}
		id := a.table + "\x00" + canonical(a.key)
		if seen[id] {
			return errBody(http.StatusBadRequest, "ValidationException",
				"Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
		actions[i] = a
	}
	for i, a := range actions {
		err := c.apply(ctx, a)
		if err == nil {
			continue
		}
		ae, ok := err.(*apiError)
		switch {
		case ok && ae.code == "ConditionalCheckFailedException":
		case ok && ae.code == "ValidationException" && strings.Contains(ae.message, "exceeded the maximum allowed size"):
		default:
			return c.abort(ctx, actions[:i], err)
		}
		if rerr := c.restore(ctx, actions[:i]); rerr != nil {
			return errBody(http.StatusInternalServerError, "InternalServerError", rerr.Error())
		}
		return c.cancel(ctx, actions, i, ae)
	}
	if in.ClientRequestToken != "" {
		for tok, prev := range s.tokens {
			if now.Sub(prev.at) >= TokenWindow {
				delete(s.tokens, tok)
			}
		}
		s.tokens[in.ClientRequestToken] = committed{digest: digest, at: now}
	}
	return http.StatusOK, []byte("{}")
}

// parse reads one member: its kind, table and key.
func (c caller) parse(ctx context.Context, ti map[string]object) (*action, error) {
	if len(ti) != 1 {
		return nil, fmt.Errorf("a TransactWriteItem has exactly one of Put, Update, Delete and ConditionCheck, got %d", len(ti))
	}
	a := &action{}
	for kind, fields := range ti {
		a.kind, a.fields = kind, fields
	}
	switch a.kind {
	case "Put", "Update", "Delete", "ConditionCheck":
	default:
		return nil, fmt.Errorf("unknown TransactWriteItem member %q", a.kind)
	}
	if err := json.Unmarshal(a.fields["TableName"], &a.table); err != nil || a.table == "" {
		return nil, fmt.Errorf("%s: TableName is required", a.kind)
	}
	var rv string
	if r, ok := a.fields["ReturnValuesOnConditionCheckFailure"]; ok {
		_ = json.Unmarshal(r, &rv)
		delete(a.fields, "ReturnValuesOnConditionCheckFailure")
	}
	a.oldOnFail = rv == "ALL_OLD"
	if a.kind != "Put" {
		if err := json.Unmarshal(a.fields["Key"], &a.key); err != nil || len(a.key) == 0 {
			return nil, fmt.Errorf("%s: Key is required", a.kind)
		}
		return a, nil
	}
	var item object
	if err := json.Unmarshal(a.fields["Item"], &item); err != nil || len(item) == 0 {
		return nil, fmt.Errorf("Put: Item is required")
	}
	names, err := c.keyNames(ctx, a.table)
	if err != nil {
		return nil, err
	}
	a.key = object{}
	for _, n := range names {
		v, ok := item[n]
		if !ok {
			return nil, fmt.Errorf("One of the required keys was not given a value")
		}
		a.key[n] = v
	}
	return a, nil
}

// keyNames returns a table's key attributes, read once with DescribeTable.
func (c caller) keyNames(ctx context.Context, table string) ([]string, error) {
	if k, ok := c.shim.keys[table]; ok {
		return k, nil
	}
	var out struct {
		Table struct {
			KeySchema []struct{ AttributeName string }
		}
	}
	if err := c.call(ctx, "DescribeTable", object{"TableName": raw(table)}, &out); err != nil {
		return nil, err
	}
	var names []string
	for _, k := range out.Table.KeySchema {
		names = append(names, k.AttributeName)
	}
	c.shim.keys[table] = names
	return names, nil
}

// writeOps names the single-item call of each member kind that writes.
var writeOps = map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}

// apply runs one member as a single conditional write and keeps the item as
// it was before in a.before: the write's own ALL_OLD answer, so a member
// costs dynalite one call. A ConditionCheck reads the item first (check puts
// it back as it was). When a write's condition fails and the member wants
// the item it failed on, a read takes it: the shim runs the transaction
// alone, so nothing changed it meanwhile.
func (c caller) apply(ctx context.Context, a *action) error {
	op, write := writeOps[a.kind]
	if !write {
		if err := c.snapshot(ctx, a); err != nil {
			return err
		}
		return c.check(ctx, a)
	}
	in := make(object, len(a.fields)+1)
	for k, v := range a.fields {
		in[k] = v
	}
	in["ReturnValues"] = raw("ALL_OLD")
	var out struct{ Attributes object }
	err := c.call(ctx, op, in, &out)
	a.before = out.Attributes
	if ae, ok := err.(*apiError); ok && ae.code == "ConditionalCheckFailedException" && a.oldOnFail {
		if serr := c.snapshot(ctx, a); serr != nil {
			return serr
		}
	}
	return err
}

// snapshot reads a member's item, consistently, into a.before (nil when
// there is none).
func (c caller) snapshot(ctx context.Context, a *action) error {
	var snap struct{ Item object }
	if err := c.call(ctx, "GetItem", object{"TableName": raw(a.table), "Key": raw(a.key), "ConsistentRead": raw(true)}, &snap); err != nil {
		return err
	}
	a.before = snap.Item
	return nil
}

// check evaluates a ConditionCheck with a write that changes nothing: the
// item put back as it was under the condition, or, when there is no item, a
// conditional delete of the missing key.
func (c caller) check(ctx context.Context, a *action) error {
	var cond string
	_ = json.Unmarshal(a.fields["ConditionExpression"], &cond)
	w := object{"TableName": raw(a.table), "ConditionExpression": raw(cond)}
	// A write's names and values may serve its update expression too; the
	// check takes those its condition uses (DynamoDB refuses unused ones).
	used := map[string]bool{}
	for _, tok := range placeholder.FindAllString(cond, -1) {
		used[tok] = true
	}
	for _, f := range []string{"ExpressionAttributeNames", "ExpressionAttributeValues"} {
		var m object
		if err := json.Unmarshal(a.fields[f], &m); err != nil || len(m) == 0 {
			continue
		}
		for k := range m {
			if !used[k] {
				delete(m, k)
			}
		}
		if len(m) > 0 {
			w[f] = raw(m)
		}
	}
	if a.before != nil {
		w["Item"] = raw(a.before)
		return c.call(ctx, "PutItem", w, nil)
	}
	w["Key"] = raw(a.key)
	return c.call(ctx, "DeleteItem", w, nil)
}

// placeholder matches the names (#n) and values (:v) of an expression.
var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// restore puts back, in reverse, the items of members already applied.
func (c caller) restore(ctx context.Context, done []*action) error {
	for i := len(done) - 1; i >= 0; i-- {
		a := done[i]
		if a.kind == "ConditionCheck" {
			continue
		}
		var err error
		if a.before != nil {
			err = c.call(ctx, "PutItem", object{"TableName": raw(a.table), "Item": raw(a.before)}, nil)
		} else {
			err = c.call(ctx, "DeleteItem", object{"TableName": raw(a.table), "Key": raw(a.key)}, nil)
		}
		if err != nil {
			return fmt.Errorf("restore member %d of a canceled transaction: %w", i, err)
		}
	}
	return nil
}

// abort restores the members applied and answers err as dynalite gave it.
func (c caller) abort(ctx context.Context, done []*action, err error) (int, []byte) {
	if rerr := c.restore(ctx, done); rerr != nil {
		return errBody(http.StatusInternalServerError, "InternalServerError", rerr.Error())
	}
	if ae, ok := err.(*apiError); ok {
		return ae.status, ae.body
	}
	return errBody(http.StatusInternalServerError, "InternalServerError", err.Error())
}

// reason is one CancellationReason.
type reason struct {
	Code    string
	Message string `json:",omitempty"`
	Item    object `json:",omitempty"`
}

// cancel answers TransactionCanceledException for a transaction whose
// member failed failed with err (its writes already undone), with one
// reason per member as DynamoDB gives them: every later member with a
// condition is checked too (against the state before the transaction, which
// the restore brought back; no two members share an item), so each failing
// condition is named, and the rest are None.
func (c caller) cancel(ctx context.Context, actions []*action, failed int, err *apiError) (int, []byte) {
	reasons := make([]reason, len(actions))
	for i := range reasons {
		reasons[i].Code = "None"
	}
	conditionFailed := func(i int) {
		reasons[i] = reason{Code: "ConditionalCheckFailed", Message: "The conditional request failed"}
		if actions[i].oldOnFail && actions[i].before != nil {
			reasons[i].Item = actions[i].before
		}
	}
	if err.code == "ConditionalCheckFailedException" {
		conditionFailed(failed)
	} else {
		reasons[failed] = reason{Code: "ValidationError", Message: err.message}
	}
	for i := failed + 1; i < len(actions); i++ {
		a := actions[i]
		if _, ok := a.fields["ConditionExpression"]; !ok {
			continue
		}
		if gerr := c.snapshot(ctx, a); gerr != nil {
			return errBody(http.StatusInternalServerError, "InternalServerError", gerr.Error())
		}
		cerr := c.check(ctx, a)
		if ae, ok := cerr.(*apiError); ok && ae.code == "ConditionalCheckFailedException" {
			conditionFailed(i)
		} else if cerr != nil {
			return errBody(http.StatusInternalServerError, "InternalServerError", cerr.Error())
		}
	}
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = r.Code
	}
	out, _ := json.Marshal(map[string]any{
		"__type":              errPrefix + "TransactionCanceledException",
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})
	return http.StatusBadRequest, out
}

func errBody(status int, code, msg string) (int, []byte) {
	out, _ := json.Marshal(map[string]string{"__type": errPrefix + code, "message": msg})
	return status, out
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	s, out := errBody(status, code, msg)
	w.Header().Set("Content-Type", amzJSON)
	w.WriteHeader(s)
	_, _ = w.Write(out)
}

// raw encodes v for an object of the wire protocol.
func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// canonical renders a key the same whatever its attributes' order.
func canonical(key object) string {
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('=')
		b.Write(key[n])
		b.WriteByte(';')
	}
	return b.String()
}
