package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// Kernel log lines in the NVIDIA driver's Xid format (`NVRM: Xid
// (PCI:<bus>): <code>, pid=..., <text>`), as dmesg and journalctl -k print
// them, with the prefixes each adds; older drivers omit "PCI:" and the pid.
const (
	xidFallenOff  = "[ 5107.644336] NVRM: Xid (PCI:0000:00:1e): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	xidRowRemap   = "May 18 19:02:39 ip-10-0-1-17 kernel: NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."
	xidDBE        = "[ 912.004117] NVRM: Xid (PCI:0000:00:1e): 48, pid=2210, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
	xidUncontain  = "Mar 02 09:14:55 ip-10-0-1-17 kernel: NVRM: Xid (PCI:0000:3b:00): 95, pid=4155, name=python, Uncontained: FBHUB. RST: Yes, D-RST: No"
	xidMMUFault   = "[ 266.469093] NVRM: Xid (PCI:0000:00:1e): 31, pid=2201, name=python3, Ch 0000000b, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_4c000000."
	xidOldFormat  = "[ 4909.922970] NVRM: Xid (0000:01:00): 13, 0005 00000000 0000502d 00000104 00000000 00000100"
	xidOldFallen  = "[ 5107.644336] NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus."
	notXid        = "May 18 19:02:39 ip-10-0-1-17 kernel: NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae"
	otherKernLine = "[    3.120045] nvidia-nvlink: Nvlink Core is being initialized, major device number 236"
)

func TestParseXids(t *testing.T) {
	t.Parallel()
	xids := agent.ParseXids([]byte(strings.Join([]string{otherKernLine, notXid, xidFallenOff, xidOldFormat, xidUncontain}, "\n")))
	if len(xids) != 3 {
		t.Fatalf("%d events: %+v", len(xids), xids)
	}
	if x := xids[0]; x.BusID != "0000:00:1e" || x.Code != 79 || !strings.HasSuffix(x.Text, "GPU has fallen off the bus.") {
		t.Fatalf("first %+v", x)
	}
	if x := xids[1]; x.BusID != "0000:01:00" || x.Code != 13 {
		t.Fatalf("old format %+v", x)
	}
	if x := xids[2]; x.BusID != "0000:3b:00" || x.Code != 95 || !strings.HasPrefix(x.Text, "pid=4155") {
		t.Fatalf("journal %+v", x)
	}
}

func TestXidLogCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		lines []string
		fatal []int
		want  []string // in the problem; none: healthy
	}{
		{"no Xid", []string{otherKernLine, notXid}, nil, nil},
		{"application errors only", []string{xidMMUFault, xidOldFormat}, nil, nil},
		{"fallen off the bus", []string{otherKernLine, xidFallenOff}, nil, []string{"Xid 79 on GPU 0000:00:1e", "fallen off the bus"}},
		{"old driver's format", []string{xidOldFallen}, nil, []string{"Xid 79 on GPU 0000:03:00"}},
		{"row remapping pending", []string{xidRowRemap}, nil, []string{"Xid 63 on GPU 0000:10:1c"}},
		{"double bit ECC", []string{xidMMUFault, xidDBE}, nil, []string{"Xid 48 on GPU 0000:00:1e"}},
		{"uncontained ECC, journal prefix", []string{xidUncontain}, nil, []string{"Xid 95 on GPU 0000:3b:00"}},
		{"repeated events are named once", []string{xidFallenOff, xidFallenOff, xidDBE}, nil, []string{"Xid 79", "; Xid 48"}},
		{"an operator's list", []string{xidMMUFault, xidFallenOff}, []int{31}, []string{"Xid 31 on GPU 0000:00:1e"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kern.log")
			if err := os.WriteFile(path, []byte(strings.Join(c.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := agent.XidLog{Path: path, Fatal: c.fatal}.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(c.want) == 0 && p != "" {
				t.Fatalf("healthy log judged sick: %s", p)
			}
			for _, w := range c.want {
				if !strings.Contains(p, w) {
					t.Fatalf("problem %q lacks %q", p, w)
				}
			}
			if strings.Count(p, "Xid 79") > 1 {
				t.Fatalf("named twice: %s", p)
			}
			if c.fatal != nil && strings.Contains(p, "Xid 79") {
				t.Fatalf("the operator's list was not used: %s", p)
			}
		})
	}
	// The command source: its output is read; a failing command is an error.
	log := filepath.Join(t.TempDir(), "dmesg.out")
	if err := os.WriteFile(log, []byte(xidFallenOff+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := agent.XidLog{Command: "cat " + log}.Check(context.Background())
	if err != nil || !strings.Contains(p, "Xid 79") {
		t.Fatalf("command source: %q, %v", p, err)
	}
	if _, err := (agent.XidLog{Command: "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1"}).Check(context.Background()); err == nil || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("failing command: %v", err)
	}
}

// A fatal Xid logged mid-job drains the worker as a sick nvidia-smi does;
// an application's Xid (an MMU fault) does not.
func TestFatalXidDrainsTheWorker(t *testing.T) {
	e := newStack(t, false)
	newFakeSMI(t, smiHealthy, 0)
	kern := filepath.Join(t.TempDir(), "kern.log")
	if err := os.WriteFile(kern, []byte(otherKernLine+"\n"+xidMMUFault+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.create("j1", `{"seconds": 30}`)
	a := e.start("x1", agent.SleepRunner{}, func(c *agent.Config) {
		c.GPU, c.Xid, c.HealthEvery = &agent.NvidiaSMI{}, &agent.XidLog{Path: kern}, 20*time.Millisecond
	})
	e.waitFor("j1 leased", func() bool { return e.job("j1").Status == job.Leased })
	f, err := os.OpenFile(kern, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(xidFallenOff + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := a.wait(t); !errors.Is(err, agent.ErrUnhealthy) || !strings.Contains(err.Error(), "Xid 79") {
		t.Fatalf("agent: %v", err)
	}
	if j := e.job("j1"); j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 {
		t.Fatalf("after the Xid: %s attempts %d preemptions %d", j.Status, j.Attempts, j.Preemptions)
	}
	if w, err := e.stack.Store.GetWorker(e.ctx, "x1"); err != nil || w.Status != worker.Unhealthy {
		t.Fatalf("the sick worker: %+v, %v", w, err)
	}
}
