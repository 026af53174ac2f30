package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// A console login nonce is used once, even by many processes at once: each
// store here stands for one API process on the same table.
func TestConsoleLoginIsUsedOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, table := testenv.DynamoDB(t)
	e.st = store.New(client, store.Options{Table: table, Config: e.cfg})
	other := store.New(client, store.Options{Table: table, Config: e.cfg})
	exp := t0.Add(2 * time.Minute)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := e.st
			if i%2 == 1 {
				st = other
			}
			results[i] = st.UseConsoleLogin(e.ctx, "nonce-1", exp)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrLoginUsed):
			t.Fatalf("UseConsoleLogin: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d uses of one login succeeded, want 1", ok, len(results))
	}
	if err := other.UseConsoleLogin(e.ctx, "nonce-2", exp); err != nil {
		t.Fatalf("another nonce: %v", err)
	}
	if err := e.st.UseConsoleLogin(e.ctx, "", exp); !errors.Is(err, store.ErrLoginUsed) {
		t.Fatalf("an empty nonce: %v", err)
	}
}

func TestConsoleSessionsEndOneByOneOrAllAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if ended, err := e.st.ConsoleSessionEnded(e.ctx, "s1"); err != nil || ended {
		t.Fatalf("a live session: ended %v, %v", ended, err)
	}
	if err := e.st.EndConsoleSession(e.ctx, "s1", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   string
		want bool
	}{{"s1", true}, {"s2", false}} {
		if ended, err := e.st.ConsoleSessionEnded(e.ctx, c.id); err != nil || ended != c.want {
			t.Fatalf("session %s: ended %v, %v; want %v", c.id, ended, err, c.want)
		}
	}
	const op = "arn:aws:iam::123456789012:user/ops"
	if n, err := e.st.ConsoleEpoch(e.ctx, op); err != nil || n != 0 {
		t.Fatalf("epoch before any sign-out everywhere: %d, %v", n, err)
	}
	for want := int64(1); want <= 2; want++ {
		if n, err := e.st.EndConsoleSessions(e.ctx, op); err != nil || n != want {
			t.Fatalf("EndConsoleSessions = %d, %v; want %d", n, err, want)
		}
	}
	if n, err := e.st.ConsoleEpoch(e.ctx, op); err != nil || n != 2 {
		t.Fatalf("epoch: %d, %v", n, err)
	}
	if n, err := e.st.ConsoleEpoch(e.ctx, "someone-else"); err != nil || n != 0 {
		t.Fatalf("another operator's epoch: %d, %v", n, err)
	}
}
