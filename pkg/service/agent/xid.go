package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultFatalXids are the Xid codes that make a GPU unfit for jobs until
// it is reset or replaced (NVIDIA's Xid catalog, docs/worker.md): 48 double
// bit ECC error, 63 and 64 ECC page retirement or row remapping event and
// failure, 74 NVLink error, 79 GPU has fallen off the bus, 92 high single
// bit ECC error rate, 94 contained and 95 uncontained ECC error.
var DefaultFatalXids = []int{48, 63, 64, 74, 79, 92, 94, 95}

// xidLine matches the NVIDIA driver's kernel log line for an Xid event,
// `NVRM: Xid (PCI:0000:00:1e): 79, pid=..., GPU has fallen off the bus.`,
// whatever prefix (timestamp, host, "kernel:") the log source adds. Older
// drivers write the bus id without "PCI:".
var xidLine = regexp.MustCompile(`NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),\s*(.*)$`)

// Xid is one Xid event from the kernel log.
type Xid struct {
	// BusID is the GPU's PCI bus id as the driver logs it (0000:00:1e).
	BusID string
	Code  int
	// Text is what follows the code (pid, process name, description).
	Text string
}

// ParseXids reads the Xid events of kernel log lines (dmesg, journalctl -k,
// /var/log/messages), in order; other lines are skipped.
func ParseXids(log []byte) []Xid {
	var out []Xid
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		m := xidLine.FindStringSubmatch(strings.TrimRight(sc.Text(), "\r"))
		if m == nil {
			continue
		}
		code, err := strconv.Atoi(m[2])
		if err != nil {
			continue
		}
		out = append(out, Xid{BusID: m[1], Code: code, Text: strings.TrimSpace(m[3])})
	}
	return out
}

// XidLog is where the agent reads the kernel log for Xid events: the
// output of Command (run with /bin/sh -c; e.g. `dmesg`, `journalctl -k -b
// --no-pager`) or the file at Path.
type XidLog struct {
	Command string
	Path    string
	// Fatal are the codes that make the GPU sick (default DefaultFatalXids).
	Fatal []int
	// Timeout bounds the command (default 20s).
	Timeout time.Duration
}

// Read answers the source's lines.
func (x XidLog) Read(ctx context.Context) ([]byte, error) {
	if x.Path != "" {
		data, err := os.ReadFile(x.Path)
		if err != nil {
			return nil, fmt.Errorf("kernel log %s: %w", x.Path, err)
		}
		return data, nil
	}
	timeout := x.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", x.Command)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kernel log command %q failed (%v): %s", x.Command, err, tailOf(stderr.Bytes(), 512))
	}
	return stdout.Bytes(), nil
}

// Check reads the source and names its fatal Xid events (empty: none). The
// kernel log holds what happened since the machine booted, and a fatal Xid
// lasts until the GPU is reset, so any fatal event makes the GPU sick.
func (x XidLog) Check(ctx context.Context) (string, error) {
	data, err := x.Read(ctx)
	if err != nil {
		return "", err
	}
	return xidProblem(ParseXids(data), x.Fatal), nil
}

// xidProblem names the fatal events among xids, one per GPU and code.
func xidProblem(xids []Xid, fatal []int) string {
	if fatal == nil {
		fatal = DefaultFatalXids
	}
	isFatal := make(map[int]bool, len(fatal))
	for _, c := range fatal {
		isFatal[c] = true
	}
	seen := map[string]bool{}
	var problems []string
	for _, x := range xids {
		key := x.BusID + "/" + strconv.Itoa(x.Code)
		if !isFatal[x.Code] || seen[key] {
			continue
		}
		seen[key] = true
		problems = append(problems, fmt.Sprintf("Xid %d on GPU %s: %s", x.Code, x.BusID, x.Text))
	}
	return strings.Join(problems, "; ")
}
