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

// guard sits in front of the embedded DynamoDB server and closes two of its
// gaps where fleetq's correctness depends on the service's behaviour. The
// emulator stores items of any size; the guard refuses, as DynamoDB does, every write that would leave an item
// over MaxItemBytes: a PutItem (ValidationException "Item size has exceeded
// the maximum allowed size"), an UpdateItem (ValidationException "Item size
// to update has exceeded the maximum allowed size") and a TransactWriteItems
// member (TransactionCanceledException with a ValidationError reason at that
// member). An update's result is only known after it ran, so writes are
// serialized here, the items they touch are read first, and an oversize
// result is undone before the error is answered.
//
// It also honours TransactWriteItems' ClientRequestToken, which the emulator
// ignores: a transaction repeated with the token of one that succeeded in the
// last 10 minutes answers success again without being applied twice (the
// SDK keeps the token across its retries, so a retry after a lost answer
// meets its own write as success, as in DynamoDB), and the same token with
// other parameters answers IdempotentParameterMismatchException. A token of
// a transaction that failed is not remembered.
type guard struct {
	next http.Handler

	mu     sync.Mutex // serializes writes
	keys   map[string][]string
	tokens map[string]tokenUse
	now    func() time.Time
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
	default:
		l.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		ddbError(w, "SerializationException", "could not read the request")
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch op {
	case "PutItem":
		var in struct{ Item map[string]json.RawMessage }
		if json.Unmarshal(body, &in) == nil {
			if n, err := ItemSize(in.Item); err == nil && n > MaxItemBytes {
				ddbError(w, "ValidationException", "Item size has exceeded the maximum allowed size")
				return
			}
		}
	case "UpdateItem":
		var in struct {
			TableName string
			Key       map[string]json.RawMessage
		}
		if json.Unmarshal(body, &in) == nil {
			l.guardUpdates(w, r, body, []member{{table: in.TableName, key: in.Key, update: true}}, false)
			return
		}
	case "TransactWriteItems":
		token, digest := requestToken(body)
		if token != "" {
			if use, ok := l.tokens[token]; ok && l.clock().Sub(use.at) < tokenWindow {
				if use.digest != digest {
					ddbError(w, "IdempotentParameterMismatchException", "Request parameters do not match the parameters of the original request with the same client request token")
					return
				}
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				_, _ = w.Write([]byte("{}"))
				return
			}
			rec := httptest.NewRecorder()
			if !l.transact(rec, r, body) {
				l.forward(rec, r, body)
			}
			if rec.Code == http.StatusOK {
				l.remember(token, digest)
			}
			copyResponse(w, rec)
			return
		}
		if l.transact(w, r, body) {
			return
		}
	}
	l.forward(w, r, body)
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
}

func (l *guard) transact(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var in struct {
		TransactItems []struct {
			Put *struct {
				TableName string
				Item      map[string]json.RawMessage
			}
			Update, Delete, ConditionCheck *struct {
				TableName string
				Key       map[string]json.RawMessage
			}
		}
	}
	if json.Unmarshal(body, &in) != nil {
		return false
	}
	members := make([]member, len(in.TransactItems))
	reasons := make([]string, len(in.TransactItems))
	oversizePut := false
	for i, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			if n, err := ItemSize(it.Put.Item); err == nil && n > MaxItemBytes {
				reasons[i] = "ValidationError"
				oversizePut = true
			}
			members[i] = member{table: it.Put.TableName, key: l.keyOf(r, it.Put.TableName, it.Put.Item)}
		case it.Update != nil:
			members[i] = member{table: it.Update.TableName, key: it.Update.Key, update: true}
		case it.Delete != nil:
			members[i] = member{table: it.Delete.TableName, key: it.Delete.Key}
		case it.ConditionCheck != nil:
			members[i] = member{table: it.ConditionCheck.TableName} // writes nothing
		}
	}
	if oversizePut {
		canceled(w, reasons, "Item size has exceeded the maximum allowed size")
		return true
	}
	l.guardUpdates(w, r, body, members, true)
	return true
}

// guardUpdates runs a write whose members may include updates: it reads each
// member's item, forwards the write, and when an updated item came out over
// the limit, puts every member back as it was and answers the service's error.
func (l *guard) guardUpdates(w http.ResponseWriter, r *http.Request, body []byte, members []member, tx bool) {
	before := make([]map[string]json.RawMessage, len(members))
	for i, m := range members {
		if m.key != nil {
			before[i] = l.get(r, m.table, m.key)
		}
	}
	rec := httptest.NewRecorder()
	l.forward(rec, r, body)
	if rec.Code == http.StatusOK {
		reasons := make([]string, len(members))
		over := false
		for i, m := range members {
			if !m.update {
				continue
			}
			if n, err := ItemSize(l.get(r, m.table, m.key)); err == nil && n > MaxItemBytes {
				reasons[i], over = "ValidationError", true
			}
		}
		if over {
			for i, m := range members {
				if m.key != nil {
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
	copyResponse(w, rec)
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

// remember records a succeeded transaction's token and forgets the ones
// past the window.
func (l *guard) remember(token string, digest [sha256.Size]byte) {
	now := l.clock()
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

// keyOf picks the table's key attributes out of an item.
func (l *guard) keyOf(r *http.Request, table string, item map[string]json.RawMessage) map[string]json.RawMessage {
	names, ok := l.keys[table]
	if !ok {
		var out struct {
			Table struct {
				KeySchema []struct{ AttributeName string }
			}
		}
		if l.call(r, "DescribeTable", map[string]any{"TableName": table}, &out) != http.StatusOK {
			return nil
		}
		for _, k := range out.Table.KeySchema {
			names = append(names, k.AttributeName)
		}
		if l.keys == nil {
			l.keys = map[string][]string{}
		}
		l.keys[table] = names
	}
	key := map[string]json.RawMessage{}
	for _, n := range names {
		key[n] = item[n]
	}
	return key
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
