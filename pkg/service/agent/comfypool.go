package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ComfyUIPool runs jobs on several ComfyUI servers of one machine — the
// common one-ComfyUI-per-GPU layout — each job on a free one. Run the agent
// with MaxConcurrency equal to the number of servers.
type ComfyUIPool struct {
	Runners []ComfyUIRunner

	mu   sync.Mutex
	busy map[int]bool
}

// NewComfyUIPool is a pool of one runner per URL, each like template.
func NewComfyUIPool(template ComfyUIRunner, urls []string) *ComfyUIPool {
	p := &ComfyUIPool{}
	for _, u := range urls {
		r := template
		r.URL = u
		p.Runners = append(p.Runners, r)
	}
	return p
}

// Ready answers nil when a free server answers; with none free it says
// why the busy ones are busy.
func (p *ComfyUIPool) Ready(ctx context.Context) error {
	var errs []string
	for i, r := range p.Runners {
		p.mu.Lock()
		busy := p.busy[i]
		p.mu.Unlock()
		if busy {
			continue
		}
		err := r.Ready(ctx)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", r.base(), err))
	}
	if len(errs) == 0 {
		return errors.New("every ComfyUI server is busy")
	}
	return errors.New(strings.Join(errs, "; "))
}

// Run takes a free server that answers and runs the job on it.
func (p *ComfyUIPool) Run(ctx context.Context, j *Job) (json.RawMessage, error) {
	i, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	defer p.give(i)
	return p.Runners[i].Run(ctx, j)
}

func (p *ComfyUIPool) take(ctx context.Context) (int, error) {
	var last error
	for i, r := range p.Runners {
		p.mu.Lock()
		if p.busy == nil {
			p.busy = map[int]bool{}
		}
		if p.busy[i] {
			p.mu.Unlock()
			continue
		}
		p.busy[i] = true
		p.mu.Unlock()
		if last = r.Ready(ctx); last == nil {
			return i, nil
		}
		p.give(i)
	}
	if last == nil {
		return 0, Retryable(CodeComfyUIBusy, "every ComfyUI server of this machine is busy (run the agent with --max-concurrency equal to the number of servers)")
	}
	return 0, Retryable(CodeComfyUIUnreachable, "no free ComfyUI server answers: %v", last)
}

func (p *ComfyUIPool) give(i int) {
	p.mu.Lock()
	delete(p.busy, i)
	p.mu.Unlock()
}
