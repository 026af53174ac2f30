package agent

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// comfyLog writes what ComfyUI does with a job's prompt to the job's log —
// the tail the agent keeps and uploads, as it does a command's output — one
// line per event, each with the time since the run began:
//
//	[comfyui +0.012s] prompt 6f1c… queued on http://127.0.0.1:8188
//	[comfyui +0.020s] node 4 (CheckpointLoaderSimple) cached
//	[comfyui +0.021s] node 3 (KSampler) started
//	[comfyui +9.480s] node 3 (KSampler) finished in 9.459s
//	[comfyui +9.902s] prompt finished: success in 9.890s
//	[comfyui +9.950s] output img_00001_.png of node 9 (SaveImage) delivered to output_url
type comfyLog struct {
	mu     sync.Mutex
	w      io.Writer
	clk    clock.Clock
	start  time.Time
	queued time.Time
	nodes  map[string]comfyNode
}

func newComfyLog(w io.Writer, clk clock.Clock, nodes map[string]comfyNode) *comfyLog {
	return &comfyLog{w: w, clk: clk, start: clk.Now(), nodes: nodes}
}

// printf writes one line (or several, for a message that has them).
func (l *comfyLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	now := l.clk.Now()
	fmt.Fprintf(l.w, "[comfyui +%s] %s\n", seconds(now.Sub(l.start)), msg)
}

// queuedOn writes that ComfyUI has the prompt, and starts the prompt's
// clock.
func (l *comfyLog) queuedOn(id, base string, found bool) {
	l.mu.Lock()
	l.queued = l.clk.Now()
	l.mu.Unlock()
	if found {
		l.printf("prompt %s queued on %s (found there after the answer to its post was lost)", id, base)
		return
	}
	l.printf("prompt %s queued on %s", id, base)
}

// node names a node by id and, when the workflow has it, class.
func (l *comfyLog) node(id string) string {
	if n, ok := l.nodes[id]; ok && n.ClassType != "" {
		return "node " + id + " (" + n.ClassType + ")"
	}
	return "node " + id
}

// finished writes how the prompt ended, as its history entry says, and
// how long it took since it was queued.
func (l *comfyLog) finished(h comfyHistory) {
	status := "success"
	if h.Status != nil && h.Status.StatusStr != "" {
		status = h.Status.StatusStr
	}
	l.mu.Lock()
	took := l.clk.Now().Sub(l.queued)
	if l.queued.IsZero() {
		took = l.clk.Now().Sub(l.start)
	}
	l.mu.Unlock()
	l.printf("prompt finished: %s in %s", status, seconds(took))
}

// failure writes ComfyUI's error of a node and its traceback, indented.
func (l *comfyLog) failure(nodeID, nodeType string, ran time.Duration, excType, msg string, traceback []string) {
	name := "node " + nodeID
	if nodeType != "" {
		name += " (" + nodeType + ")"
	}
	after := ""
	if ran > 0 {
		after = " after " + seconds(ran)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s failed%s: %s: %s", name, after, excType, strings.TrimSpace(msg))
	if len(traceback) > 0 {
		b.WriteString("\n    Traceback (most recent call last):")
		for _, frame := range traceback {
			for _, line := range strings.Split(strings.TrimRight(frame, "\n"), "\n") {
				b.WriteString("\n    " + line)
			}
		}
	}
	l.printf("%s", b.String())
}

// seconds formats a duration as seconds with milliseconds ("9.459s").
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}
