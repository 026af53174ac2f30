package localaws

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DynamoDB's throughput limits of one partition, base table and global
// secondary index alike (Developer Guide, "DynamoDB burst and adaptive
// capacity": a partition takes at most 3,000 read units and 1,000 write
// units a second, reads and writes limited independently). Adaptive
// capacity can split a hot partition key's items over more partitions
// ("split for heat"), but not when its items are written in the order of
// their sort keys (times, sequence numbers): every new item lands past the
// last split point. The model holds a partition key written in order to
// one partition's limits, and reports one written out of order (worker ids,
// hashed job ids) as one DynamoDB can split (PartitionLoad.Splittable).
const (
	PartitionWriteUnits = 1000
	PartitionReadUnits  = 3000
)

// The throughput an on-demand table (and each of its global secondary
// indexes) serves at once (Developer Guide, "DynamoDB on-demand capacity
// mode", "Initial throughput and scaling properties"): a new table up to
// 4,000 write request units and 12,000 read request units a second (or a
// linear combination of both), and at any time up to double the previous
// peak it served.
const (
	TableInitialWriteUnits = 4000
	TableInitialReadUnits  = 12000
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
	// Splittable is set when the key's items were written out of their
	// sort keys' order, so DynamoDB's split for heat can spread them over
	// more partitions: its share of one partition's limit is not a limit.
	Splittable bool
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
	split := ""
	if p.Splittable {
		split = ", written out of order: DynamoDB can split it for heat"
	}
	return fmt.Sprintf("%s key %q at %s: %.1f write units, %.1f read units (%.0f%% of the partition's limit%s)",
		where, p.Key, p.Second.UTC().Format(time.RFC3339), p.Units.Write, p.Units.Read, 100*p.Share(), split)
}

// TableLoad is what a table, or one of its indexes, took in one second of
// the clock, against the throughput on-demand serves it in that second.
type TableLoad struct {
	Table  string
	Index  string // "" for the base table
	Second time.Time
	Units  Units
	// Limit is the throughput served at once in that second: the larger of
	// a new table's and double the peak of the seconds before.
	Limit Units
}

// Share is the load as a fraction of the throughput served at once, reads
// and writes combined linearly.
func (t TableLoad) Share() float64 { return t.Units.Write/t.Limit.Write + t.Units.Read/t.Limit.Read }

func (t TableLoad) String() string {
	where := t.Table
	if t.Index != "" {
		where += "/" + t.Index
	}
	return fmt.Sprintf("%s at %s: %.1f write units, %.1f read units (%.0f%% of the %.0f write units or %.0f read units on-demand serves at once)",
		where, t.Second.UTC().Format(time.RFC3339), t.Units.Write, t.Units.Read, 100*t.Share(), t.Limit.Write, t.Limit.Read)
}

// Capacity is a capacity model of DynamoDB for the embedded server: it
// accounts the read and write units every request consumes, per partition
// key and per second of the server's clock, as DynamoDB bills and limits
// them (Developer Guide, "DynamoDB read and write operations" and "Global
// secondary indexes: provisioned throughput considerations"):
//
//   - a write consumes one unit per started KB of the larger of the item's
//     size before and after it (at least one), a write that fails its
//     condition the same for the larger of the item as it is and the item
//     the write would have made; a transaction's members two units per KB
//     (a canceled transaction is charged as its members' transactional
//     writes on the base table, and a ConditionCheck as a transactional
//     write of the checked item);
//   - each global secondary index entry the write changes costs one unit
//     per KB of the entry (its key attributes, the table's key attributes
//     and its projected attributes; the 100 bytes DynamoDB adds to each
//     entry are storage, not throughput): a put when the
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
// It holds each partition key to one partition's limits unless its items
// are written out of sort-key order (split for heat), and each table and
// index to what on-demand serves at once (TableLoads).
//
// A Capacity is safe for concurrent use; its zero value is ready.
type Capacity struct {
	mu      sync.Mutex
	loads   map[partitionSecond]Units
	byIndex map[string]Units
	total   Units
	order   map[partitionID]*writeOrder
	refused int64
}

type partitionID struct{ table, index, key string }

type partitionSecond struct {
	table, index, key string
	second            int64
}

// writeOrder is how the items of a partition key were written: the highest
// sort key written before the latest instant, the highest written at it,
// and how many writes landed below a sort key written at an earlier
// instant. Writes at one instant (concurrent requests, a fake clock's
// step) are not ordered among themselves: items made at the same time
// sort by whatever follows their time.
type writeOrder struct {
	instant         time.Time
	before, current sortValue
	started         bool // before holds a value
	writes, below   int
}

// splittable reports whether most writes landed below a sort key written
// earlier: the key's items are not written in order.
func (o *writeOrder) splittable() bool { return o != nil && 2*o.below > o.writes }

// sortValue is a sort key's value, ordered as DynamoDB orders it: numbers
// by value, strings and binaries by their bytes.
type sortValue struct {
	num   float64
	isNum bool
	text  string
}

func (a sortValue) less(b sortValue) bool {
	if a.isNum && b.isNum {
		return a.num < b.num
	}
	return a.text < b.text
}

func sortValueOf(v json.RawMessage) sortValue {
	var av map[string]string
	if json.Unmarshal(v, &av) != nil {
		return sortValue{text: string(v)}
	}
	if n, ok := av["N"]; ok {
		if f, err := strconv.ParseFloat(n, 64); err == nil {
			return sortValue{num: f, isNum: true}
		}
	}
	for _, x := range av {
		return sortValue{text: x}
	}
	return sortValue{}
}

// wrote records that a write at time at placed an item (or index entry)
// at sort key rng of a partition key.
func (c *Capacity) wrote(at time.Time, table, index, key string, rng json.RawMessage) {
	if rng == nil {
		return
	}
	sv := sortValueOf(rng)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.order == nil {
		c.order = map[partitionID]*writeOrder{}
	}
	id := partitionID{table, index, key}
	o := c.order[id]
	if o == nil {
		c.order[id] = &writeOrder{instant: at, current: sv, writes: 1}
		return
	}
	if at.After(o.instant) {
		if !o.started || o.before.less(o.current) {
			o.before = o.current
		}
		o.instant, o.started, o.current = at, true, sv
	} else if o.current.less(sv) {
		o.current = sv
	}
	o.writes++
	if o.started && sv.less(o.before) {
		o.below++
	}
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
		out = append(out, PartitionLoad{Table: k.table, Index: k.index, Key: k.key, Second: time.Unix(k.second, 0).UTC(), Units: u,
			Splittable: c.order[partitionID{k.table, k.index, k.key}].splittable()})
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

// Hottest returns the heaviest load in any second of a partition key
// DynamoDB cannot split for heat, the ones its per-partition limits hold
// (zero when there is none).
func (c *Capacity) Hottest() PartitionLoad {
	for _, l := range c.Loads() {
		if !l.Splittable {
			return l
		}
	}
	return PartitionLoad{}
}

// TableLoads returns every table's and index's load in every second, in
// time order, each against what on-demand serves it at once then: the
// larger of a new table's throughput and double the peak of the seconds
// before (the peak of reads and of writes apart, as the guide states both).
func (c *Capacity) TableLoads() []TableLoad {
	type tableSecond struct {
		table, index string
		second       int64
	}
	sums := map[tableSecond]Units{}
	c.mu.Lock()
	for k, u := range c.loads {
		ts := tableSecond{k.table, k.index, k.second}
		sums[ts] = sums[ts].Add(u)
	}
	c.mu.Unlock()
	out := make([]TableLoad, 0, len(sums))
	for k, u := range sums {
		out = append(out, TableLoad{Table: k.table, Index: k.index, Second: time.Unix(k.second, 0).UTC(), Units: u})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Table != b.Table || a.Index != b.Index {
			return a.Table+"\x00"+a.Index < b.Table+"\x00"+b.Index
		}
		return a.Second.Before(b.Second)
	})
	var peak Units
	for i := range out {
		if i == 0 || out[i].Table != out[i-1].Table || out[i].Index != out[i-1].Index {
			peak = Units{Write: TableInitialWriteUnits / 2, Read: TableInitialReadUnits / 2}
		}
		out[i].Limit = Units{Write: 2 * peak.Write, Read: 2 * peak.Read}
		peak = Units{Write: max(peak.Write, out[i].Units.Write), Read: max(peak.Read, out[i].Units.Read)}
	}
	return out
}

// HottestTable returns the table or index second nearest what on-demand
// serves at once (zero when nothing was consumed).
func (c *Capacity) HottestTable() TableLoad {
	var hot TableLoad
	for _, t := range c.TableLoads() {
		if t.Share() > hot.Share() || hot.Limit == (Units{}) {
			hot = t
		}
	}
	return hot
}

// Err reports where DynamoDB would have throttled: the partition keys it
// cannot split that went past one partition's limits in some second (a
// throttled index write throttles the base table's write that caused it),
// and the tables and indexes that went past what on-demand serves at once.
func (c *Capacity) Err() error {
	var over []string
	for _, l := range c.Loads() {
		if l.Share() <= 1 {
			break
		}
		if !l.Splittable {
			over = append(over, l.String())
		}
	}
	var tables []string
	for _, t := range c.TableLoads() {
		if t.Share() > 1 {
			tables = append(tables, t.String())
		}
	}
	var errs []string
	if len(over) > 0 {
		errs = append(errs, fmt.Sprintf("%d partition-seconds over DynamoDB's per-partition limit: %s", len(over), strings.Join(over, "; ")))
	}
	if len(tables) > 0 {
		errs = append(errs, fmt.Sprintf("%d table-seconds over what on-demand serves at once: %s", len(tables), strings.Join(tables, "; ")))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; and "))
}

// Refused returns how many write requests were refused by a condition (a
// transaction canceled by one counts once) since the model was made or
// reset: lost claims, on the lease path.
func (c *Capacity) Refused() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

func (c *Capacity) countRefused() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused++
}

// Reset forgets everything consumed so far (not the order partition keys
// were written in, which is the table's, not the second's).
func (c *Capacity) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads, c.byIndex, c.total, c.refused = nil, nil, Units{}, 0
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
	hash  string          // the entry's partition key value
	key   string          // its index key, canonical
	rng   json.RawMessage // its sort key's value (nil without one)
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
	e := &indexEntry{hash: scalar(h), key: canonical(h) + "\x00" + canonical(r), rng: r, attrs: map[string]json.RawMessage{}}
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

// size is the entry's size for throughput: its attributes' (DynamoDB adds
// 100 bytes to each entry for storage only).
func (e *indexEntry) size() int {
	n, _ := ItemSize(e.attrs)
	return n
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

// write is one item written: as it was and as it is after (nil: absent);
// for a write refused by its condition, after is the item the write would
// have made.
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
	if w.after != nil && s.rng != "" {
		c.wrote(at, w.table, "", scalar(w.key[s.hash]), w.key[s.rng])
	}
	for _, ix := range s.indexes {
		old, cur := s.entry(ix, w.before), s.entry(ix, w.after)
		if cur != nil && (old == nil || old.key != cur.key || !old.sameAttrs(cur)) {
			c.wrote(at, w.table, ix.name, cur.hash, cur.rng)
		}
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
// a canceled transaction): the larger of the item as it is and the item
// the write would have made, nothing in indexes.
func (c *Capacity) chargeRefused(at time.Time, s *tableSchema, w write) {
	bs, _ := ItemSize(w.before)
	as, _ := ItemSize(w.after)
	u := WriteUnits(max(bs, as))
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
