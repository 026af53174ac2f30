package agent

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestTailKeepsTheEndAndSaysWhatItDropped(t *testing.T) {
	t.Parallel()
	tl := newTail(10)
	tl.Write([]byte("0123"))
	if got := string(tl.Bytes()); got != "0123" {
		t.Fatalf("short = %q", got)
	}
	for _, chunk := range []string{"456789", "abcdefghij", "klm"} {
		tl.Write([]byte(chunk))
	}
	got := string(tl.Bytes())
	want := "[fleetq: the first 13 bytes of this attempt's output were dropped; the last 10 follow]\ndefghijklm"
	if got != want {
		t.Fatalf("tail = %q, want %q", got, want)
	}

	// Concurrent writers (stdout and stderr) lose nothing of the count.
	tl = newTail(100)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				tl.Write([]byte("xxxxxxxxx\n"))
			}
		}()
	}
	wg.Wait()
	head, body, _ := bytes.Cut(tl.Bytes(), []byte("\n"))
	if len(body) != 100 || !strings.Contains(string(head), "the first 39900 bytes") {
		t.Fatalf("concurrent tail: header %q, %d bytes kept", head, len(body))
	}
}
