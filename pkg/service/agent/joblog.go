package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// DefaultLogTailBytes is how much of an attempt's runner output the agent
// keeps and uploads: the last 1 MiB.
const DefaultLogTailBytes = 1 << 20

// tail keeps the last max bytes written to it, and counts the rest. It is
// safe for concurrent writers (a command's stdout and stderr).
type tail struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func newTail(max int) *tail {
	if max <= 0 {
		max = DefaultLogTailBytes
	}
	return &tail{max: max}
}

// Write keeps p's end; it never fails.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	// Trim once the buffer holds twice the tail: amortized linear.
	if len(t.buf) > 2*t.max {
		over := len(t.buf) - t.max
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Bytes is the kept tail, after a line saying how much came before it
// when anything was dropped.
func (t *tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, dropped := t.buf, t.dropped
	if over := len(b) - t.max; over > 0 {
		b, dropped = b[over:], dropped+int64(over)
	}
	if dropped == 0 {
		return append([]byte(nil), b...)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "[fleetq: the first %d bytes of this attempt's output were dropped; the last %d follow]\n", dropped, len(b))
	out.Write(b)
	return out.Bytes()
}

// uploadLog puts the attempt's output tail to its log URL (none: the stage
// has no asset bucket). A failure is logged: the outcome matters more.
func (a *Agent) uploadLog(ctx context.Context, r *running, log *slog.Logger) {
	url := r.outputs.Load().log
	if url == "" {
		return
	}
	body := r.log.Bytes()
	if err := put(ctx, a.cfg.HTTP, url, bytes.NewReader(body), int64(len(body))); err != nil {
		log.Warn("job log upload failed", "error", err.Error())
		return
	}
	log.Debug("job log uploaded", "bytes", len(body))
}

// logWriter is where a runner writes its output (io.Discard when unset).
func (j *Job) logWriter() io.Writer {
	if j.Log == nil {
		return io.Discard
	}
	return j.Log
}
