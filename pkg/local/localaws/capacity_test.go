package localaws_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

var c0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// modeled starts a server with a capacity model and an index lag, and a
// table PK (hash) with one index "by-g" on G (hash) / GS (range)
// projecting P only.
func modeled(t *testing.T, lag time.Duration) (*dynamodb.Client, string, *localaws.Capacity, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(c0)
	model := localaws.NewCapacity()
	srv, err := localaws.StartDynamoDBWith("", localaws.DynamoDBOptions{Capacity: model, IndexLag: lag, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	db := localaws.DynamoDBClient(srv.URL)
	table := "modeled"
	s := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	_, err = db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{s("PK"), s("G"), s("GS")},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("by-g"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("G"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("GS"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"P"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	model.Reset()
	return db, table, model, clk
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func pk(v string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": str(v)}
}

func set(t *testing.T, db *dynamodb.Client, table, key, expr string, values map[string]types.AttributeValue) {
	t.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: &table, Key: pk(key),
		UpdateExpression: aws.String(expr), ExpressionAttributeValues: values})
	if err != nil {
		t.Fatal(err)
	}
}

func queryG(t *testing.T, db *dynamodb.Client, table, g string) int {
	t.Helper()
	out, err := db.Query(context.Background(), &dynamodb.QueryInput{TableName: &table, IndexName: aws.String("by-g"),
		KeyConditionExpression:    aws.String("G = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": str(g)}})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

func TestCapacityModelChargesAsDynamoDBBills(t *testing.T) {
	ctx := context.Background()
	db, table, model, _ := modeled(t, 0)
	step := func(what string, want localaws.Units, wantByIndex map[string]float64, do func()) {
		t.Helper()
		before, beforeIx := model.Total(), model.ByIndex()
		do()
		got := model.Total().Sub(before)
		if got != want {
			t.Errorf("%s: charged %+v, want %+v", what, got, want)
		}
		for ix, w := range wantByIndex {
			if g := model.ByIndex()[ix].Sub(beforeIx[ix]).Write; g != w {
				t.Errorf("%s: %q took %.1f write units, want %.1f", what, ix, g, w)
			}
		}
	}
	big := strings.Repeat("x", 1500) // the item is over 1 KB: two write units
	step("a put of a 1.5 KB item entering the index", localaws.Units{Write: 2 + 1}, map[string]float64{"": 2, "by-g": 1}, func() {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"PK": str("a"), "G": str("g1"), "GS": str("1"), "P": str("p"), "big": str(big)}})
		if err != nil {
			t.Fatal(err)
		}
	})
	step("an update of an attribute the index does not project", localaws.Units{Write: 2}, map[string]float64{"by-g": 0}, func() {
		set(t, db, table, "a", "SET big = :v", map[string]types.AttributeValue{":v": str(big + "y")})
	})
	step("an update of a projected attribute", localaws.Units{Write: 2 + 1}, map[string]float64{"by-g": 1}, func() {
		set(t, db, table, "a", "SET P = :v", map[string]types.AttributeValue{":v": str("q")})
	})
	step("an update moving the index sort key: a delete and a put", localaws.Units{Write: 2 + 2}, map[string]float64{"by-g": 2}, func() {
		set(t, db, table, "a", "SET GS = :v", map[string]types.AttributeValue{":v": str("2")})
	})
	step("the same update in a transaction: the base write doubles", localaws.Units{Write: 4 + 2}, map[string]float64{"": 4, "by-g": 2}, func() {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: &table, Key: pk("a"), UpdateExpression: aws.String("SET GS = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": str("3")}}}}})
		if err != nil {
			t.Fatal(err)
		}
	})
	step("a write refused by its condition still costs the item's size", localaws.Units{Write: 2}, nil, func() {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: pk("a"),
			UpdateExpression: aws.String("SET P = :v"), ConditionExpression: aws.String("attribute_not_exists(PK)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": str("z")}})
		if err == nil {
			t.Fatal("the conditional update went through")
		}
	})
	step("a consistent read of an item under 4 KB", localaws.Units{Read: 1}, nil, func() {
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: pk("a"), ConsistentRead: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
	})
	step("an eventually consistent read: half", localaws.Units{Read: 0.5}, nil, func() {
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: pk("a")}); err != nil {
			t.Fatal(err)
		}
	})
	step("an index query reads entries, eventually consistent", localaws.Units{Read: 0.5}, nil, func() {
		if n := queryG(t, db, table, "g1"); n != 1 {
			t.Fatalf("index query found %d items, want 1", n)
		}
	})
	step("a delete takes the item out of the index", localaws.Units{Write: 2 + 1}, map[string]float64{"by-g": 1}, func() {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: pk("a")}); err != nil {
			t.Fatal(err)
		}
	})
	if l := model.Hottest(); l.Key != "a" || l.Index != "" {
		t.Errorf("hottest partition = %v, want the base table's key a", l)
	}
}

func TestCapacityModelFailsAPartitionPastItsLimit(t *testing.T) {
	ctx := context.Background()
	db, table, model, clk := modeled(t, 0)
	put := func(i int) { // index sort keys in the order of time, which split for heat cannot help
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"PK": str(fmt.Sprintf("item-%d", i)), "G": str("hot"), "GS": str(fmt.Sprintf("%06d", i))}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// 800 index writes to one index key in one second: under the limit.
	for i := range 800 {
		put(i)
	}
	if err := model.Err(); err != nil {
		t.Fatalf("800 writes in a second: %v", err)
	}
	if l := model.Hottest(); l.Index != "by-g" || l.Key != "hot" || l.Units.Write != 800 {
		t.Fatalf("hottest = %v, want by-g key hot with 800 write units", l)
	}
	// The next second starts afresh ...
	clk.Advance(time.Second)
	for i := range 800 {
		put(1000 + i)
	}
	if err := model.Err(); err != nil {
		t.Fatalf("800 more in the next second: %v", err)
	}
	// ... and 201 more in it go past 1,000 write units on one index key.
	for i := range 201 {
		put(2000 + i)
	}
	err := model.Err()
	if err == nil || !strings.Contains(err.Error(), `by-g key "hot"`) {
		t.Fatalf("1,001 writes to one index key in a second: Err() = %v, want the hot index key named", err)
	}
}

// Split for heat (Developer Guide, "DynamoDB burst and adaptive
// capacity"): a partition key whose items are written out of their sort
// keys' order can be spread over more partitions, one written in order
// cannot. 1,200 index writes to each of two keys in one second, one
// after the other (writes at one instant have no order): the key
// written in time order is past its limit, the one written in random order
// is reported as one DynamoDB can split, and is no error.
func TestCapacityModelLetsDynamoDBSplitKeysWrittenOutOfOrder(t *testing.T) {
	ctx := context.Background()
	db, table, model, clk := modeled(t, 0)
	const n = 1200
	for i := range n {
		clk.Advance(time.Second / (n + 1)) // each write at its own time, all in one second
		for _, w := range []struct {
			g  string
			gs int
		}{{"ordered", i}, {"shuffled", i * 7919 % n}} {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
				"PK": str(fmt.Sprintf("%s-%d", w.g, i)), "G": str(w.g), "GS": str(fmt.Sprintf("%06d", w.gs))}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	err := model.Err()
	if err == nil || !strings.Contains(err.Error(), `by-g key "ordered"`) {
		t.Fatalf("Err() = %v, want the key written in order named", err)
	}
	if strings.Contains(err.Error(), `"shuffled"`) {
		t.Fatalf("Err() = %v, names the key written out of order, which DynamoDB can split", err)
	}
	found := false
	for _, l := range model.Loads() {
		if l.Key == "shuffled" {
			found = true
			if !l.Splittable || l.Units.Write != n {
				t.Fatalf("the shuffled key's load = %v, want %d write units, splittable", l, n)
			}
		}
		if l.Key == "ordered" && l.Splittable {
			t.Fatalf("the key written in order is reported splittable: %v", l)
		}
	}
	if !found {
		t.Fatal("the shuffled key has no load")
	}
	if h := model.Hottest(); h.Key != "ordered" {
		t.Fatalf("Hottest() = %v, want the key written in order", h)
	}
}

// padTo answers a value for attribute P that makes an index entry of the
// other attributes' size fixed bytes (names and values of strings) total
// bytes.
func padTo(total, fixed int) string { return strings.Repeat("p", total-fixed-len("P")) }

// The index read examples of the Developer Guide ("DynamoDB read and write
// operations", "Using Global Secondary Indexes in DynamoDB": a Query reads
// the sum of the sizes of the entries it returns, their projected
// attributes, rounded up to 4 KB once per query, half when eventually
// consistent as index reads are). The 100 bytes DynamoDB adds to each index
// entry are storage, not read size.
func TestCapacityModelReadsIndexEntriesAsDynamoDBBills(t *testing.T) {
	ctx := context.Background()
	db, table, model, _ := modeled(t, 0)
	put := func(pkv, g string, size int) {
		t.Helper()
		// PK, G and GS (each a 1- or 2-byte name and its value) and P.
		fixed := len("PK") + len(pkv) + len("G") + len(g) + len("GS") + len("1")
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"PK": str(pkv), "G": str(g), "GS": str("1"), "P": str(padTo(size, fixed)), "other": str(strings.Repeat("o", 5000))}})
		if err != nil {
			t.Fatal(err)
		}
	}
	read := func(what, g string, entries int, want float64) {
		t.Helper()
		before := model.Total()
		if n := queryG(t, db, table, g); n != entries {
			t.Fatalf("%s: the query found %d entries, want %d", what, n, entries)
		}
		if got := model.Total().Sub(before); got != (localaws.Units{Read: want}) {
			t.Errorf("%s: charged %+v, want %.1f read units", what, got, want)
		}
	}
	// An entry of 4,000 bytes (its item is over 9 KB, not projected) reads
	// one 4 KB step: half a unit.
	put("one", "four-thousand", 4000)
	read("an index entry of 4,000 bytes", "four-thousand", 1, 0.5)
	// The guide's Query example: 10 items of 40.8 KB in all read 44 KB,
	// 11 units, 5.5 eventually consistent (not ten 8 KB steps).
	for i := range 10 {
		put(fmt.Sprintf("q%d", i), "ten", 4178)
	}
	read("10 entries of 40.8 KB in all", "ten", 10, 5.5)
}

// The guide's rule for a write refused by its condition ("DynamoDB read and
// write operations"): it consumes write units for the larger of the item as
// it is and the item the write would have made, doubled in a transaction.
// A 500-byte item that a refused write would have made 1.5 KB costs 2
// units, 4 in a transaction.
func TestCapacityModelChargesARefusedWriteItsLargerItem(t *testing.T) {
	ctx := context.Background()
	db, table, model, _ := modeled(t, 0)
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"PK": str("a"), "small": str(strings.Repeat("s", 500))}})
	if err != nil {
		t.Fatal(err)
	}
	big := str(strings.Repeat("b", 1500))
	never := aws.String("attribute_not_exists(PK)")
	for _, c := range []struct {
		what  string
		write func() error
		want  float64
	}{
		{"a refused put of a 1.5 KB item", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ConditionExpression: never,
				Item: map[string]types.AttributeValue{"PK": str("a"), "big": big}})
			return err
		}, 2},
		{"a refused update growing it past 1 KB", func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: pk("a"), ConditionExpression: never,
				UpdateExpression: aws.String("SET #b = :b"), ExpressionAttributeNames: map[string]string{"#b": "big"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":b": big}})
			return err
		}, 2},
		{"the same update canceled in a transaction", func() error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
				TableName: &table, Key: pk("a"), ConditionExpression: never,
				UpdateExpression: aws.String("SET big = :b"), ExpressionAttributeValues: map[string]types.AttributeValue{":b": big}}}}})
			return err
		}, 4},
		{"a refused delete: the item as it is", func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: pk("a"), ConditionExpression: never})
			return err
		}, 1},
	} {
		before := model.Total()
		if err := c.write(); err == nil {
			t.Fatalf("%s went through", c.what)
		}
		if got := model.Total().Sub(before); got != (localaws.Units{Write: c.want}) {
			t.Errorf("%s: charged %+v, want %.0f write units", c.what, got, c.want)
		}
	}
	if n := model.Refused(); n != 4 {
		t.Errorf("Refused() = %d, want 4", n)
	}
	if it := get(t, db, table, "a"); it["big"] != nil {
		t.Fatalf("a refused write changed the item: %v", it)
	}
}

func TestIndexLagHidesRecentWritesFromIndexQueriesOnly(t *testing.T) {
	ctx := context.Background()
	db, table, _, clk := modeled(t, 500*time.Millisecond)
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"PK": str("a"), "G": str("g1"), "GS": str("1")}})
	if err != nil {
		t.Fatal(err)
	}
	if get(t, db, table, "a") == nil {
		t.Fatal("a consistent read of the table does not see the write")
	}
	if n := queryG(t, db, table, "g1"); n != 0 {
		t.Fatalf("the index shows the write at once: %d items", n)
	}
	clk.Advance(499 * time.Millisecond)
	if n := queryG(t, db, table, "g1"); n != 0 {
		t.Fatalf("the index shows the write after 499 ms: %d items", n)
	}
	clk.Advance(time.Millisecond)
	if n := queryG(t, db, table, "g1"); n != 1 {
		t.Fatalf("the index still hides the write after the lag: %d items", n)
	}
	// A move out of the partition is seen late too: the old entry stays.
	set(t, db, table, "a", "SET G = :v", map[string]types.AttributeValue{":v": str("g2")})
	if n := queryG(t, db, table, "g1"); n != 1 {
		t.Fatalf("the moved item left the old index partition at once: %d items", n)
	}
	clk.Advance(500 * time.Millisecond)
	if a, b := queryG(t, db, table, "g1"), queryG(t, db, table, "g2"); a != 0 || b != 1 {
		t.Fatalf("after the lag the index has %d in g1 and %d in g2, want 0 and 1", a, b)
	}
}

// Writes of different items run side by side, and a transaction is still
// applied whole or not at all, never seen half done: money moved between
// accounts by concurrent transactions, each conditioned on the balance it
// draws from, is neither created nor lost, and no balance goes negative.
func TestConcurrentTransactionsStayAtomicAndIsolated(t *testing.T) {
	ctx := context.Background()
	db, table, _, _ := modeled(t, 0)
	const accounts, start = 5, 100
	for i := range accounts {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"PK": str(fmt.Sprint(i)), "n": &types.AttributeValueMemberN{Value: fmt.Sprint(start)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	move := func(from, to, amount int) error {
		v := &types.AttributeValueMemberN{Value: fmt.Sprint(amount)}
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: &table, Key: pk(fmt.Sprint(from)), UpdateExpression: aws.String("SET n = n - :a"),
				ConditionExpression: aws.String("n >= :a"), ExpressionAttributeValues: map[string]types.AttributeValue{":a": v}}},
			{Update: &types.Update{TableName: &table, Key: pk(fmt.Sprint(to)), UpdateExpression: aws.String("SET n = n + :a"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":a": v}}},
		}})
		return err
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				from := (g + i) % accounts
				_ = move(from, (from+1+i%(accounts-1))%accounts, 7+g) // a refusal is fine: the balance was short
			}
		}()
	}
	wg.Wait()
	total := 0
	for i := range accounts {
		it := get(t, db, table, fmt.Sprint(i))
		var n int
		fmt.Sscan(it["n"].(*types.AttributeValueMemberN).Value, &n)
		if n < 0 {
			t.Errorf("account %d went negative: %d", i, n)
		}
		total += n
	}
	if total != accounts*start {
		t.Fatalf("the accounts hold %d after the moves, want %d", total, accounts*start)
	}
}
