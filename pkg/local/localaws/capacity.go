package localaws

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// DynamoDB's throughput limits of one partition, base table and global
// secondary index alike (Developer Guide, "Service, account, and table
// quotas": per partition, 3,000 read units and 1,000 write units per
// second). A hot key cannot be helped by adaptive capacity's "split for
// heat" when its sort keys are written in order, which is how fleetq's
// index keys are written (times and priorities), so the model holds each
// partition key to them.
const (
	PartitionWriteUnits = 1000
	PartitionReadUnits  = 3000
)

// Units are read and write capacity units.
type Units struct {
	Read, Write float64
}

// Add returns u + v.
func (u Units) Add(v Units) Units { return Units{Read: u.Read + v.Read, Write: u.Write + v.Write} }

// Sub returns u - v.
func (u Units) Sub(v Units) Units { return Units{Read: u.Read - v.Read, Write: u.Write - v.Write} }

// PartitionLoad is what one partition key of a table or of one of its
// indexes took in one second of the clock.
type PartitionLoad struct {
	Table  string
	Index  string // "" for the base table
	Key    string // the partition key's value
	Second time.Time
	Units  Units
}

// Share is the load as a fraction of the partition's limit: the larger of
// its read and write shares.
func (p PartitionLoad) Share() float64 {
	return max(p.Units.Write/PartitionWriteUnits, p.Units.Read/PartitionReadUnits)
}

func (p PartitionLoad) String() string {
	where := p.Table
	if p.Index != "" {
		where += "/" + p.Index
	}
	return fmt.Sprintf("%s key %q at %s: %.1f write units, %.1f read units (%.0f%% of the partition's limit)",
		where, p.Key, p.Second.UTC().Format(time.RFC3339), p.Units.Write, p.Units.Read, 100*p.Share())
}

// Capacity is a capacity model of DynamoDB for the embedded server: it
// accounts the read and write units every request consumes, per partition
// key and per second of the server's clock, as DynamoDB bills and limits
// them (Developer Guide, "DynamoDB read and write operations" and "Global
// secondary indexes: provisioned throughput considerations"):
//
//   - a write consumes one unit per started KB of the larger of the item's
//     size before and after it (at least one), a write that fails its
//     condition the same for the item as it is; a transaction's members
//     two units per KB (a canceled transaction is charged as its members'
//     transactional writes on the base table, and a ConditionCheck as a
//     transactional write of the checked item);
//   - each global secondary index entry the write changes costs one unit
//     per KB of the entry (its key attributes, the table's key attributes,
//     its projected attributes and 100 bytes of overhead): a put when the
//     item enters the index, a delete when it leaves, both when an index
//     key changes, one update when only projected attributes change, and
//     nothing when no projected attribute changes; index writes are not
//     doubled for transactions (they are applied asynchronously);
//   - a GetItem reads the item's size rounded up to 4 KB, one unit per 4 KB
//     when consistent and half when not; a Query the total size of the
//     items it evaluates (before any filter; index entries for an index),
//     rounded up to 4 KB once per page, at least one 4 KB step, halved when
//     eventually consistent (index queries always are).
//
// A Capacity is safe for concurrent use; its zero value is ready.
type Capacity struct {
	mu      sync.Mutex
	loads   map[partitionSecond]Units
	byIndex map[string]Units
	total   Units
}

type partitionSecond struct {
	table, index, key string
	second            int64
}

// NewCapacity returns an empty capacity model.
func NewCapacity() *Capacity { return &Capacity{} }

func (c *Capacity) charge(at time.Time, table, index, key string, u Units) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loads == nil {
		c.loads, c.byIndex = map[partitionSecond]Units{}, map[string]Units{}
	}
	k := partitionSecond{table: table, index: index, key: key, second: at.Unix()}
	c.loads[k] = c.loads[k].Add(u)
	c.byIndex[index] = c.byIndex[index].Add(u)
	c.total = c.total.Add(u)
}

// Total returns every unit consumed since the model was made or reset.
func (c *Capacity) Total() Units {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// ByIndex returns the units consumed per index ("" for the base table).
func (c *Capacity) ByIndex() map[string]Units {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Units, len(c.byIndex))
	for k, v := range c.byIndex {
		out[k] = v
	}
	return out
}

// Loads returns every partition key's load in every second, the heaviest
// (by share of its limit) first.
func (c *Capacity) Loads() []PartitionLoad {
	c.mu.Lock()
	out := make([]PartitionLoad, 0, len(c.loads))
	for k, u := range c.loads {
		out = append(out, PartitionLoad{Table: k.table, Index: k.index, Key: k.key, Second: time.Unix(k.second, 0).UTC(), Units: u})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].Share(), out[j].Share(); a != b {
			return a > b
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Hottest returns the heaviest partition key's load in any second (zero
// when nothing was consumed).
func (c *Capacity) Hottest() PartitionLoad {
	l := c.Loads()
	if len(l) == 0 {
		return PartitionLoad{}
	}
	return l[0]
}

// Err reports the partitions that went past DynamoDB's per-partition
// limits in some second, where DynamoDB would have throttled (a throttled
// index write throttles the base table's write that caused it).
func (c *Capacity) Err() error {
	var over []string
	for _, l := range c.Loads() {
		if l.Share() <= 1 {
			break
		}
		over = append(over, l.String())
	}
	if len(over) == 0 {
		return nil
	}
	return fmt.Errorf("%d partition-seconds over DynamoDB's per-partition limit: %s", len(over), strings.Join(over, "; "))
}

// Reset forgets everything consumed so far.
func (c *Capacity) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads, c.byIndex, c.total = nil, nil, Units{}
}

// WriteUnits is the units of a write of size bytes: one per started KB,
// at least one.
func WriteUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// ReadUnits is the units of a read of size bytes: one per started 4 KB,
// at least one step, half when eventually consistent.
func ReadUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// indexEntryOverhead is what DynamoDB adds to every index entry's size.
const indexEntryOverhead = 100

// tableSchema is what the model needs of a table: its key and its global
// secondary indexes.
type tableSchema struct {
	hash, rng string
	indexes   []indexSchema
}

type indexSchema struct {
	name      string
	hash, rng string
	// projection: "ALL", "KEYS_ONLY" or "INCLUDE" with attrs.
	projection string
	attrs      []string
}

func (t *tableSchema) keyNames() []string {
	if t.rng == "" {
		return []string{t.hash}
	}
	return []string{t.hash, t.rng}
}

// indexEntry is an item's entry in an index, nil when the item is not in it.
type indexEntry struct {
	hash  string // the entry's partition key value
	key   string // its index key, canonical
	attrs map[string]json.RawMessage
}

func (t *tableSchema) entry(ix indexSchema, item map[string]json.RawMessage) *indexEntry {
	if item == nil {
		return nil
	}
	h, ok := item[ix.hash]
	if !ok || isNull(h) {
		return nil
	}
	var r json.RawMessage
	if ix.rng != "" {
		if r, ok = item[ix.rng]; !ok || isNull(r) {
			return nil
		}
	}
	e := &indexEntry{hash: scalar(h), key: canonical(h) + "\x00" + canonical(r), attrs: map[string]json.RawMessage{}}
	keep := func(name string) {
		if v, ok := item[name]; ok {
			e.attrs[name] = v
		}
	}
	for _, n := range append(t.keyNames(), ix.hash, ix.rng) {
		if n != "" {
			keep(n)
		}
	}
	switch ix.projection {
	case "ALL":
		for n := range item {
			keep(n)
		}
	case "INCLUDE":
		for _, n := range ix.attrs {
			keep(n)
		}
	}
	return e
}

func (e *indexEntry) size() int {
	n, _ := ItemSize(e.attrs)
	return n + indexEntryOverhead
}

func (e *indexEntry) sameAttrs(o *indexEntry) bool {
	if len(e.attrs) != len(o.attrs) {
		return false
	}
	for k, v := range e.attrs {
		w, ok := o.attrs[k]
		if !ok || canonical(v) != canonical(w) {
			return false
		}
	}
	return true
}

func isNull(v json.RawMessage) bool {
	var av map[string]json.RawMessage
	if json.Unmarshal(v, &av) != nil {
		return true
	}
	_, null := av["NULL"]
	return null
}

// scalar is a key attribute's value as text ({"S":"x"} is x).
func scalar(v json.RawMessage) string {
	var av map[string]json.RawMessage
	if json.Unmarshal(v, &av) != nil {
		return string(v)
	}
	for _, x := range av {
		var s string
		if json.Unmarshal(x, &s) == nil {
			return s
		}
		return string(x)
	}
	return ""
}

// canonical renders a value so that equal values render equally.
func canonical(v json.RawMessage) string {
	if v == nil {
		return ""
	}
	var x any
	if json.Unmarshal(v, &x) != nil {
		return string(v)
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// write is one item written: as it was and as it is after (nil: absent).
type write struct {
	table         string
	key           map[string]json.RawMessage
	before, after map[string]json.RawMessage
	tx            bool
	check         bool // a ConditionCheck: written nothing
}

// chargeWrite accounts one item's write that took effect.
func (c *Capacity) chargeWrite(at time.Time, s *tableSchema, w write) {
	bs, _ := ItemSize(w.before)
	as, _ := ItemSize(w.after)
	u := WriteUnits(max(bs, as))
	if w.tx {
		u *= 2
	}
	c.charge(at, w.table, "", scalar(w.key[s.hash]), Units{Write: u})
	if w.check {
		return
	}
	for _, ix := range s.indexes {
		old, cur := s.entry(ix, w.before), s.entry(ix, w.after)
		switch {
		case old == nil && cur == nil:
		case old == nil:
			c.charge(at, w.table, ix.name, cur.hash, Units{Write: WriteUnits(cur.size())})
		case cur == nil:
			c.charge(at, w.table, ix.name, old.hash, Units{Write: WriteUnits(old.size())})
		case old.key != cur.key:
			c.charge(at, w.table, ix.name, old.hash, Units{Write: WriteUnits(old.size())})
			c.charge(at, w.table, ix.name, cur.hash, Units{Write: WriteUnits(cur.size())})
		case !old.sameAttrs(cur):
			c.charge(at, w.table, ix.name, cur.hash, Units{Write: WriteUnits(max(old.size(), cur.size()))})
		}
	}
}

// chargeRefused accounts a write refused by its condition (or a member of
// a canceled transaction): the item's size as it is, nothing in indexes.
func (c *Capacity) chargeRefused(at time.Time, s *tableSchema, w write) {
	size, _ := ItemSize(w.before)
	u := WriteUnits(size)
	if w.tx {
		u *= 2
	}
	c.charge(at, w.table, "", scalar(w.key[s.hash]), Units{Write: u})
}

// chargeRead accounts one read of items (index entries when index is set)
// on the partition key.
func (c *Capacity) chargeRead(at time.Time, s *tableSchema, table, index, key string, items []map[string]json.RawMessage, consistent bool) {
	size := 0
	var ix *indexSchema
	if index != "" {
		i := slices.IndexFunc(s.indexes, func(x indexSchema) bool { return x.name == index })
		if i >= 0 {
			ix = &s.indexes[i]
		}
	}
	for _, it := range items {
		if ix != nil {
			if e := s.entry(*ix, it); e != nil {
				size += e.size()
			}
			continue
		}
		n, _ := ItemSize(it)
		size += n
	}
	c.charge(at, table, index, key, Units{Read: ReadUnits(size, consistent)})
}

// parseSchema reads a DescribeTable answer.
func parseSchema(raw []byte) (*tableSchema, error) {
	type keyElem struct{ AttributeName, KeyType string }
	var out struct {
		Table json.RawMessage
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	var t struct {
		KeySchema              []keyElem
		GlobalSecondaryIndexes []struct {
			IndexName  string
			KeySchema  []keyElem
			Projection struct {
				ProjectionType   string
				NonKeyAttributes []string
			}
		}
	}
	if err := json.Unmarshal(out.Table, &t); err != nil {
		return nil, err
	}
	keys := func(ks []keyElem) (h, r string) {
		for _, k := range ks {
			if k.KeyType == "HASH" {
				h = k.AttributeName
			} else {
				r = k.AttributeName
			}
		}
		return h, r
	}
	s := &tableSchema{}
	s.hash, s.rng = keys(t.KeySchema)
	if s.hash == "" {
		return nil, fmt.Errorf("table has no partition key")
	}
	for _, g := range t.GlobalSecondaryIndexes {
		ix := indexSchema{name: g.IndexName, projection: g.Projection.ProjectionType, attrs: g.Projection.NonKeyAttributes}
		ix.hash, ix.rng = keys(g.KeySchema)
		if ix.projection == "" {
			ix.projection = "ALL"
		}
		s.indexes = append(s.indexes, ix)
	}
	return s, nil
}
