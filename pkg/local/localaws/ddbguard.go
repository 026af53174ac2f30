package localaws

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxItemBytes is DynamoDB's limit on one item: 400 KB, counted as the UTF-8
// length of every attribute name plus the size of its value.
const MaxItemBytes = 400 * 1024

// ItemSize returns the size DynamoDB counts for an item given in its wire form
// (attribute name to {"S": ...}, {"N": ...}, {"M": ...} and so on), following
// the rules of the Developer Guide's "Item sizes and formats": strings by
// UTF-8 length, binaries by their bytes, numbers about one byte per two
// significant digits plus one, booleans and nulls one byte, lists and maps 3
// bytes plus one per element besides their contents.
func ItemSize(item map[string]json.RawMessage) (int, error) {
	n := 0
	for name, raw := range item {
		v, err := valueSize(raw)
		if err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		n += len(name) + v
	}
	return n, nil
}

func valueSize(raw json.RawMessage) (int, error) {
	var av map[string]json.RawMessage
	if err := json.Unmarshal(raw, &av); err != nil {
		return 0, err
	}
	if len(av) != 1 {
		return 0, fmt.Errorf("an attribute value has exactly one type, got %d", len(av))
	}
	for typ, v := range av {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return len(s), err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			return numberSize(s), err
		case "B":
			var b []byte // base64 on the wire
			err := json.Unmarshal(v, &b)
			return len(b), err
		case "BOOL", "NULL":
			return 1, nil
		case "SS", "NS", "BS":
			var set []string
			if err := json.Unmarshal(v, &set); err != nil {
				return 0, err
			}
			n := 0
			for _, e := range set {
				switch typ {
				case "SS":
					n += len(e)
				case "NS":
					n += numberSize(e)
				default:
					b, err := base64.StdEncoding.DecodeString(e)
					if err != nil {
						return 0, err
					}
					n += len(b)
				}
			}
			return n, nil
		case "L":
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil {
				return 0, err
			}
			n := 3 + len(list)
			for _, e := range list {
				s, err := valueSize(e)
				if err != nil {
					return 0, err
				}
				n += s
			}
			return n, nil
		case "M":
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return 0, err
			}
			s, err := ItemSize(m)
			return 3 + len(m) + s, err
		default:
			return 0, fmt.Errorf("unknown attribute type %q", typ)
		}
	}
	return 0, nil
}

// overLimit reports whether an item is past MaxItemBytes. An item's wire
// form is never smaller than the size DynamoDB counts: names and strings
// come quoted, a number's digits each take a byte where two cost one,
// binaries are longer in base64, and every type tag and bracket is longer
// than the byte or three a type costs. So an item whose names and values
// fit in MaxItemBytes as written is within the limit without being
// measured, which is most writes.
func overLimit(item map[string]json.RawMessage) bool {
	wire := 0
	for name, raw := range item {
		wire += len(name) + len(raw)
	}
	if wire <= MaxItemBytes {
		return false
	}
	n, err := ItemSize(item)
	return err == nil && n > MaxItemBytes
}

// numberSize is a number's size: one byte per two significant digits, plus one.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.Trim(s, "0")
	digits := utf8.RuneCountInString(s)
	if digits == 0 {
		digits = 1
	}
	return (digits+1)/2 + 1
}

// guard sits in front of the embedded DynamoDB server and closes gaps
// where fleetq's tests depend on the service's behaviour.
//
// The emulator stores items of any size; the guard refuses, as DynamoDB
// does, every write that would leave an item over MaxItemBytes: a PutItem
// (ValidationException "Item size has exceeded the maximum allowed size"),
// an UpdateItem (ValidationException "Item size to update has exceeded the
// maximum allowed size") and a TransactWriteItems member
// (TransactionCanceledException with a ValidationError reason at that
// member). An update's result is only known after it ran, so the items a
// write touches are read first, and an oversize result is undone before
// the error is answered.
//
// It honours TransactWriteItems' ClientRequestToken, which the emulator
// ignores: a transaction repeated with the token of one that succeeded in
// the last 10 minutes answers success again without being applied twice
// (the SDK keeps the token across its retries, so a retry after a lost
// answer meets its own write as success, as in DynamoDB), and the same
// token with other parameters answers IdempotentParameterMismatchException.
// A token of a transaction that failed is not remembered.
//
// Writes lock the items they touch, one lock per item (taken in key order,
// so two writes never wait on each other in a cycle): a write's read
// before, the write, its read after and any undo are one step for those
// items, and writes of other items run beside it. The emulator applies each
// request, a transaction included, under its own lock, so transactions
// stay atomic and isolated; the guard adds no ordering of its own between
// writes of different items, and so does not queue every poller behind one
// lock as a single write lock did.
//
// With a capacity model (DynamoDBOptions.Capacity) it accounts every
// request's read and write units per partition key per second (capacity.go).
// With an index lag (DynamoDBOptions.IndexLag), queries of a global
// secondary index see the table as it was that long ago.
type guard struct {
	next  http.Handler
	now   func() time.Time
	model *Capacity
	lag   time.Duration

	locks keyLocks

	tokMu  sync.Mutex
	tokens map[string]tokenUse

	schemaMu sync.Mutex
	schemas  map[string]*tableSchema
	mirrors  map[string]*mirror
	copies   map[string]bool   // the tables copyOf made
	created  map[string][]byte // CreateTable requests by table
}

// tokenUse is a ClientRequestToken of a transaction that succeeded.
type tokenUse struct {
	digest [sha256.Size]byte
	at     time.Time
}

// tokenWindow is how long DynamoDB remembers a ClientRequestToken.
const tokenWindow = 10 * time.Minute

const ddbTarget = "DynamoDB_20120810."

func (l *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), ddbTarget)
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
		l.write(w, r, op)
		return
	case "GetItem", "Query":
		if l.model != nil || l.lag > 0 {
			l.read(w, r, op)
			return
		}
	case "CreateTable":
		// Remembered to make the table's mirror alike (DescribeTable
		// answers no attribute definitions).
		body, _ := io.ReadAll(r.Body)
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		l.schemaMu.Lock()
		if l.created == nil {
			l.created = map[string][]byte{}
		}
		l.created[in.TableName] = body
		l.schemaMu.Unlock()
		l.forward(w, r, body)
		return
	case "DeleteTable":
		body, _ := io.ReadAll(r.Body)
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		l.forget(r, in.TableName)
		l.forward(w, r, body)
		return
	}
	l.next.ServeHTTP(w, r)
}

func (l *guard) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	l.next.ServeHTTP(w, r2)
}

// member is one item a write touches.
type member struct {
	table  string
	key    map[string]json.RawMessage
	update bool // its size is only known after the write
	check  bool // a ConditionCheck: it writes nothing
	put    map[string]json.RawMessage
	// expr is an update's expression and its names and values, to find
	// the item a refused update would have made.
	expr *updateExpr
}

// updateExpr is an UpdateItem's (or a transaction's Update's) expression.
type updateExpr struct {
	UpdateExpression          string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]json.RawMessage
}

// members lists the items a write touches, in the order of the request.
func (l *guard) members(r *http.Request, op string, body []byte) ([]member, bool) {
	switch op {
	case "PutItem":
		var in struct {
			TableName string
			Item      map[string]json.RawMessage
		}
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		return []member{{table: in.TableName, key: l.keyOf(r, in.TableName, in.Item), put: in.Item}}, true
	case "UpdateItem", "DeleteItem":
		var in struct {
			TableName string
			Key       map[string]json.RawMessage
			updateExpr
		}
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		m := member{table: in.TableName, key: in.Key, update: op == "UpdateItem"}
		if m.update {
			m.expr = &in.updateExpr
		}
		return []member{m}, true
	case "TransactWriteItems":
		var in struct {
			TransactItems []struct {
				Put *struct {
					TableName string
					Item      map[string]json.RawMessage
				}
				Update *struct {
					TableName string
					Key       map[string]json.RawMessage
					updateExpr
				}
				Delete, ConditionCheck *struct {
					TableName string
					Key       map[string]json.RawMessage
				}
			}
		}
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		ms := make([]member, len(in.TransactItems))
		for i, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				ms[i] = member{table: it.Put.TableName, key: l.keyOf(r, it.Put.TableName, it.Put.Item), put: it.Put.Item}
			case it.Update != nil:
				ms[i] = member{table: it.Update.TableName, key: it.Update.Key, update: true, expr: &it.Update.updateExpr}
			case it.Delete != nil:
				ms[i] = member{table: it.Delete.TableName, key: it.Delete.Key}
			case it.ConditionCheck != nil:
				ms[i] = member{table: it.ConditionCheck.TableName, key: it.ConditionCheck.Key, check: true}
			}
		}
		return ms, true
	case "BatchWriteItem":
		var in struct {
			RequestItems map[string][]struct {
				PutRequest    *struct{ Item map[string]json.RawMessage }
				DeleteRequest *struct{ Key map[string]json.RawMessage }
			}
		}
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		var ms []member
		for table, reqs := range in.RequestItems {
			for _, q := range reqs {
				switch {
				case q.PutRequest != nil:
					ms = append(ms, member{table: table, key: l.keyOf(r, table, q.PutRequest.Item), put: q.PutRequest.Item})
				case q.DeleteRequest != nil:
					ms = append(ms, member{table: table, key: q.DeleteRequest.Key})
				}
			}
		}
		return ms, true
	}
	return nil, false
}

// write runs one write request with the items it touches locked.
func (l *guard) write(w http.ResponseWriter, r *http.Request, op string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		ddbError(w, "SerializationException", "could not read the request")
		return
	}
	members, ok := l.members(r, op, body)
	if !ok {
		l.forward(w, r, body) // the emulator answers the malformed request
		return
	}
	locks := make([]string, len(members))
	for i, m := range members {
		locks[i] = l.lockName(r, m)
	}
	defer l.locks.lock(locks)()

	tx := op == "TransactWriteItems"
	var token string
	var digest [sha256.Size]byte
	if tx {
		token, digest = requestToken(body)
		if token != "" {
			if use, ok := l.usedToken(token); ok {
				if use.digest != digest {
					ddbError(w, "IdempotentParameterMismatchException", "Request parameters do not match the parameters of the original request with the same client request token")
					return
				}
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				_, _ = w.Write([]byte("{}"))
				return
			}
		}
	}
	if op == "PutItem" || tx {
		reasons := make([]string, len(members))
		over := false
		for i, m := range members {
			if m.put != nil && overLimit(m.put) {
				reasons[i], over = "ValidationError", true
			}
		}
		if over && tx {
			canceled(w, reasons, "Item size has exceeded the maximum allowed size")
			return
		}
		if over {
			ddbError(w, "ValidationException", "Item size has exceeded the maximum allowed size")
			return
		}
	}

	updates := slices.ContainsFunc(members, func(m member) bool { return m.update })
	images := updates || l.model != nil || l.lag > 0
	before := make([]map[string]json.RawMessage, len(members))
	if images {
		for i, m := range members {
			if m.key != nil {
				before[i] = l.get(r, m.table, m.key)
			}
		}
	}
	rec := httptest.NewRecorder()
	l.forward(rec, r, body)
	now := l.clock()
	if rec.Code != http.StatusOK {
		if l.model != nil && refusedByCondition(rec.Body.Bytes()) {
			l.model.countRefused()
			for i, m := range members {
				if s := l.schema(r, m.table); s != nil && m.key != nil {
					l.model.chargeRefused(now, s, write{table: m.table, key: m.key, before: before[i], after: l.attempted(r, m, before[i]), tx: tx})
				}
			}
		}
		copyResponse(w, rec)
		return
	}
	after := make([]map[string]json.RawMessage, len(members))
	if images {
		for i, m := range members {
			switch {
			case m.check:
				after[i] = before[i]
			case m.key != nil:
				after[i] = l.get(r, m.table, m.key)
			}
		}
	}
	if updates {
		reasons := make([]string, len(members))
		over := false
		for i, m := range members {
			if m.update && overLimit(after[i]) {
				reasons[i], over = "ValidationError", true
			}
		}
		if over {
			for i, m := range members {
				if m.key != nil && !m.check {
					l.restore(r, m.table, m.key, before[i])
				}
			}
			if tx {
				canceled(w, reasons, "Item size to update has exceeded the maximum allowed size")
			} else {
				ddbError(w, "ValidationException", "Item size to update has exceeded the maximum allowed size")
			}
			return
		}
	}
	if token != "" {
		l.remember(token, digest)
	}
	for i, m := range members {
		s := l.schema(r, m.table)
		if s == nil || m.key == nil {
			continue
		}
		if l.model != nil {
			l.model.chargeWrite(now, s, write{table: m.table, key: m.key, before: before[i], after: after[i], tx: tx, check: m.check})
		}
		if l.lag > 0 && !m.check {
			l.mirrorOf(r, m.table).record(now, m.key, after[i])
		}
	}
	copyResponse(w, rec)
}

// attempted answers the item a refused write would have made of the item
// before: a put's item, nothing for a delete, the item as it is for a
// ConditionCheck, and for an update the update applied to a copy of the
// item in the table's scratch copy (without its condition).
func (l *guard) attempted(r *http.Request, m member, before map[string]json.RawMessage) map[string]json.RawMessage {
	switch {
	case m.put != nil:
		return m.put
	case m.check:
		return before
	case m.expr == nil:
		return nil
	}
	scratch := l.copyOf(r, m.table, ".attempt")
	l.restore(r, scratch, m.key, before)
	in := map[string]any{"TableName": scratch, "Key": m.key, "UpdateExpression": m.expr.UpdateExpression, "ReturnValues": "ALL_NEW"}
	used := placeholder.FindAllString(m.expr.UpdateExpression, -1)
	names, values := map[string]string{}, map[string]json.RawMessage{}
	for k, v := range m.expr.ExpressionAttributeNames {
		if slices.Contains(used, k) {
			names[k] = v
		}
	}
	for k, v := range m.expr.ExpressionAttributeValues {
		if slices.Contains(used, k) {
			values[k] = v
		}
	}
	if len(names) > 0 {
		in["ExpressionAttributeNames"] = names
	}
	if len(values) > 0 {
		in["ExpressionAttributeValues"] = values
	}
	var out struct{ Attributes map[string]json.RawMessage }
	l.call(r, "UpdateItem", in, &out)
	l.call(r, "DeleteItem", map[string]any{"TableName": scratch, "Key": m.key}, nil)
	return out.Attributes
}

// refusedByCondition reports whether an error answer is a write refused by
// its condition (alone or in a transaction), which DynamoDB still charges.
func refusedByCondition(body []byte) bool {
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(body, &e)
	return strings.HasSuffix(e.Type, "ConditionalCheckFailedException") || strings.HasSuffix(e.Type, "TransactionCanceledException")
}

// read runs a GetItem or Query, charging it to the capacity model and
// answering index queries from the lagged mirror.
func (l *guard) read(w http.ResponseWriter, r *http.Request, op string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		ddbError(w, "SerializationException", "could not read the request")
		return
	}
	if op == "GetItem" {
		var in struct {
			TableName      string
			Key            map[string]json.RawMessage
			ConsistentRead bool
		}
		rec := httptest.NewRecorder()
		l.forward(rec, r, body)
		if s := l.schemaOf(r, body, &in); s != nil && rec.Code == http.StatusOK && l.model != nil {
			var out struct{ Item map[string]json.RawMessage }
			_ = json.Unmarshal(rec.Body.Bytes(), &out)
			l.model.chargeRead(l.clock(), s, in.TableName, "", scalar(in.Key[s.hash]), []map[string]json.RawMessage{out.Item}, in.ConsistentRead)
		}
		copyResponse(w, rec)
		return
	}
	var in map[string]json.RawMessage
	var q struct {
		TableName, IndexName, KeyConditionExpression, FilterExpression, Select string
		ExpressionAttributeNames                                               map[string]string
		ExpressionAttributeValues                                              map[string]json.RawMessage
		ConsistentRead                                                         bool
	}
	s := l.schemaOf(r, body, &q)
	if s == nil || json.Unmarshal(body, &in) != nil {
		l.forward(w, r, body)
		return
	}
	if q.IndexName != "" && l.lag > 0 {
		m := l.mirrorOf(r, q.TableName)
		m.mu.Lock()
		defer m.mu.Unlock()
		l.catchUp(r, m)
		in["TableName"], _ = json.Marshal(m.name)
		body, _ = json.Marshal(in)
	}
	rec := httptest.NewRecorder()
	l.forward(rec, r, body)
	if rec.Code == http.StatusOK && l.model != nil {
		var out struct{ Items []map[string]json.RawMessage }
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		hash := s.hash
		if q.IndexName != "" {
			if i := slices.IndexFunc(s.indexes, func(x indexSchema) bool { return x.name == q.IndexName }); i >= 0 {
				hash = s.indexes[i].hash
			}
		}
		items := out.Items
		if q.FilterExpression != "" || q.Select == "COUNT" {
			items = l.evaluated(r, in, q.KeyConditionExpression)
		}
		key := keyConditionValue(q.KeyConditionExpression, hash, q.ExpressionAttributeNames, q.ExpressionAttributeValues)
		l.model.chargeRead(l.clock(), s, q.TableName, q.IndexName, key, items, q.ConsistentRead && q.IndexName == "")
	}
	copyResponse(w, rec)
}

// evaluated answers the items a Query evaluated before its filter: the
// same read with its key condition only.
func (l *guard) evaluated(r *http.Request, in map[string]json.RawMessage, keyCond string) []map[string]json.RawMessage {
	shadow := map[string]json.RawMessage{}
	for _, k := range []string{"TableName", "IndexName", "KeyConditionExpression", "Limit", "ExclusiveStartKey", "ScanIndexForward", "ConsistentRead"} {
		if v, ok := in[k]; ok {
			shadow[k] = v
		}
	}
	used := placeholder.FindAllString(keyCond, -1)
	for _, k := range []string{"ExpressionAttributeNames", "ExpressionAttributeValues"} {
		var all map[string]json.RawMessage
		if json.Unmarshal(in[k], &all) != nil {
			continue
		}
		kept := map[string]json.RawMessage{}
		for name, v := range all {
			if slices.Contains(used, name) {
				kept[name] = v
			}
		}
		shadow[k], _ = json.Marshal(kept)
	}
	var out struct{ Items []map[string]json.RawMessage }
	l.call(r, "Query", shadow, &out)
	return out.Items
}

var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// keyConditionValue finds the partition key's value in a key condition.
func keyConditionValue(cond, hash string, names map[string]string, values map[string]json.RawMessage) string {
	refs := []string{hash}
	for alias, name := range names {
		if name == hash {
			refs = append(refs, alias)
		}
	}
	for _, ref := range refs {
		re := regexp.MustCompile(`(?:^|[\s(])` + regexp.QuoteMeta(ref) + `\s*=\s*(:[A-Za-z0-9_]+)`)
		if m := re.FindStringSubmatch(cond); m != nil {
			return scalar(values[m[1]])
		}
	}
	return ""
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (l *guard) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

func (l *guard) usedToken(token string) (tokenUse, bool) {
	l.tokMu.Lock()
	defer l.tokMu.Unlock()
	use, ok := l.tokens[token]
	return use, ok && l.clock().Sub(use.at) < tokenWindow
}

// remember records a succeeded transaction's token and forgets the ones
// past the window.
func (l *guard) remember(token string, digest [sha256.Size]byte) {
	now := l.clock()
	l.tokMu.Lock()
	defer l.tokMu.Unlock()
	if l.tokens == nil {
		l.tokens = map[string]tokenUse{}
	}
	for t, u := range l.tokens {
		if now.Sub(u.at) >= tokenWindow {
			delete(l.tokens, t)
		}
	}
	l.tokens[token] = tokenUse{digest: digest, at: now}
}

// requestToken returns a request's ClientRequestToken and a digest of its
// other parameters (keys sorted, so equal requests digest equally).
func requestToken(body []byte) (string, [sha256.Size]byte) {
	var in map[string]any
	if json.Unmarshal(body, &in) != nil {
		return "", [sha256.Size]byte{}
	}
	token, _ := in["ClientRequestToken"].(string)
	delete(in, "ClientRequestToken")
	canonical, _ := json.Marshal(in)
	return token, sha256.Sum256(canonical)
}

// call sends one request to the server behind and decodes its answer.
func (l *guard) call(r *http.Request, op string, in, out any) int {
	data, _ := json.Marshal(in)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data)).WithContext(r.Context())
	req.Header = r.Header.Clone()
	req.Header.Set("X-Amz-Target", ddbTarget+op)
	req.ContentLength = int64(len(data))
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, req)
	if out != nil && rec.Code == http.StatusOK {
		_ = json.Unmarshal(rec.Body.Bytes(), out)
	}
	return rec.Code
}

func (l *guard) get(r *http.Request, table string, key map[string]json.RawMessage) map[string]json.RawMessage {
	var out struct{ Item map[string]json.RawMessage }
	l.call(r, "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}, &out)
	return out.Item
}

func (l *guard) restore(r *http.Request, table string, key, item map[string]json.RawMessage) {
	if item == nil {
		l.call(r, "DeleteItem", map[string]any{"TableName": table, "Key": key}, nil)
		return
	}
	l.call(r, "PutItem", map[string]any{"TableName": table, "Item": item}, nil)
}

// schema answers a table's key and indexes, read once (nil when the table
// is unknown).
func (l *guard) schema(r *http.Request, table string) *tableSchema {
	l.schemaMu.Lock()
	s, ok := l.schemas[table]
	l.schemaMu.Unlock()
	if ok {
		return s
	}
	data, _ := json.Marshal(map[string]any{"TableName": table})
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data)).WithContext(r.Context())
	req.Header = r.Header.Clone()
	req.Header.Set("X-Amz-Target", ddbTarget+"DescribeTable")
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil
	}
	s, err := parseSchema(rec.Body.Bytes())
	if err != nil {
		return nil
	}
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	if l.schemas == nil {
		l.schemas = map[string]*tableSchema{}
	}
	if prev, ok := l.schemas[table]; ok {
		return prev
	}
	l.schemas[table] = s
	return s
}

// schemaOf decodes a request naming a table into in and answers the
// table's schema.
func (l *guard) schemaOf(r *http.Request, body []byte, in any) *tableSchema {
	if json.Unmarshal(body, in) != nil {
		return nil
	}
	var t struct{ TableName string }
	_ = json.Unmarshal(body, &t)
	return l.schema(r, t.TableName)
}

// forget drops what the guard knows of a table being deleted, and its mirror.
func (l *guard) forget(r *http.Request, table string) {
	l.schemaMu.Lock()
	delete(l.schemas, table)
	delete(l.mirrors, table)
	delete(l.created, table)
	var copies []string
	for _, suffix := range []string{".lagged", ".attempt"} {
		if l.copies[table+suffix] {
			copies = append(copies, table+suffix)
			delete(l.copies, table+suffix)
		}
	}
	l.schemaMu.Unlock()
	for _, name := range copies {
		l.call(r, "DeleteTable", map[string]any{"TableName": name}, nil)
	}
}

// keyOf picks the table's key attributes out of an item.
func (l *guard) keyOf(r *http.Request, table string, item map[string]json.RawMessage) map[string]json.RawMessage {
	s := l.schema(r, table)
	if s == nil {
		return nil
	}
	key := map[string]json.RawMessage{}
	for _, n := range s.keyNames() {
		key[n] = item[n]
	}
	return key
}

// lockName names the item a member touches, for its lock.
func (l *guard) lockName(r *http.Request, m member) string {
	s := l.schema(r, m.table)
	if s == nil || m.key == nil {
		return m.table + "\x00?"
	}
	name := m.table
	for _, n := range s.keyNames() {
		name += "\x00" + canonical(m.key[n])
	}
	return name
}

// keyLocks is one mutex per item being written.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes the locks of the named items in name order and answers the
// function that releases them.
func (k *keyLocks) lock(names []string) func() {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	taken := make([]*keyLock, len(names))
	for i, n := range names {
		k.mu.Lock()
		if k.held == nil {
			k.held = map[string]*keyLock{}
		}
		kl := k.held[n]
		if kl == nil {
			kl = &keyLock{}
			k.held[n] = kl
		}
		kl.refs++
		k.mu.Unlock()
		kl.mu.Lock()
		taken[i] = kl
	}
	return func() {
		for i := len(taken) - 1; i >= 0; i-- {
			taken[i].mu.Unlock()
			k.mu.Lock()
			if taken[i].refs--; taken[i].refs == 0 {
				delete(k.held, names[i])
			}
			k.mu.Unlock()
		}
	}
}

// mirror is a table's copy that index queries read when indexes lag: the
// writes reach it once they are IndexLag old.
type mirror struct {
	mu      sync.Mutex
	name    string
	pending []pendingWrite
}

type pendingWrite struct {
	at        time.Time
	key, item map[string]json.RawMessage // item nil: deleted
}

func (m *mirror) record(at time.Time, key, item map[string]json.RawMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, pendingWrite{at: at, key: key, item: item})
}

// mirrorOf answers a table's mirror, made on first use with the table's
// key and indexes.
func (l *guard) mirrorOf(r *http.Request, table string) *mirror {
	l.schemaMu.Lock()
	m, ok := l.mirrors[table]
	l.schemaMu.Unlock()
	if ok {
		return m
	}
	m = &mirror{name: l.copyOf(r, table, ".lagged")}
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	if l.mirrors == nil {
		l.mirrors = map[string]*mirror{}
	}
	if prev, ok := l.mirrors[table]; ok {
		return prev
	}
	l.mirrors[table] = m
	return m
}

// copyOf answers the name of an empty table alike to table (its name and
// suffix), made on first use from the table's CreateTable request.
func (l *guard) copyOf(r *http.Request, table, suffix string) string {
	name := table + suffix
	l.schemaMu.Lock()
	done := l.copies[name]
	create := l.created[table]
	l.schemaMu.Unlock()
	if done {
		return name
	}
	var in map[string]any
	if json.Unmarshal(create, &in) == nil {
		in["TableName"] = name
		l.call(r, "CreateTable", in, nil)
	}
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	if l.copies == nil {
		l.copies = map[string]bool{}
	}
	l.copies[name] = true
	return name
}

// catchUp applies to the mirror the writes at least IndexLag old (m.mu held).
func (l *guard) catchUp(r *http.Request, m *mirror) {
	due := l.clock().Add(-l.lag)
	n := 0
	for n < len(m.pending) && !m.pending[n].at.After(due) {
		p := m.pending[n]
		if p.item == nil {
			l.call(r, "DeleteItem", map[string]any{"TableName": m.name, "Key": p.key}, nil)
		} else {
			l.call(r, "PutItem", map[string]any{"TableName": m.name, "Item": p.item}, nil)
		}
		n++
	}
	m.pending = m.pending[n:]
}

func ddbError(w http.ResponseWriter, code, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": message})
}

// canceled answers TransactionCanceledException with one reason per member
// ("None" for the members that did not cause it), as DynamoDB does.
func canceled(w http.ResponseWriter, codes []string, message string) {
	reasons := make([]map[string]string, len(codes))
	names := make([]string, len(codes))
	for i, c := range codes {
		if c == "" {
			reasons[i], names[i] = map[string]string{"Code": "None"}, "None"
			continue
		}
		reasons[i], names[i] = map[string]string{"Code": c, "Message": message}, c
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(names, ", ") + "]",
		"CancellationReasons": reasons,
	})
}

// describeFence keeps minidyn's table operations apart from every other
// call: minidyn answers them without taking the lock its other operations
// take. DescribeTable reads the item count that a concurrent write changes;
// CreateTable, UpdateTable and DeleteTable change the map of tables every
// other call reads (tests that run in parallel make and drop tables while
// others write to theirs). Other calls share the fence, so writes stay as
// concurrent as minidyn lets them be.
type describeFence struct {
	mu   sync.RWMutex
	next http.Handler
}

// fencedAlone are the operations describeFence runs alone.
var fencedAlone = map[string]bool{
	ddbTarget + "DescribeTable": true, ddbTarget + "CreateTable": true,
	ddbTarget + "UpdateTable": true, ddbTarget + "DeleteTable": true,
}

func (f *describeFence) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if fencedAlone[r.Header.Get("X-Amz-Target")] {
		f.mu.Lock()
		defer f.mu.Unlock()
	} else {
		f.mu.RLock()
		defer f.mu.RUnlock()
	}
	f.next.ServeHTTP(w, r)
}
