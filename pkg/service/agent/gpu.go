package agent

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gpuQuery are the --query-gpu fields the agent reads (names as
// `nvidia-smi --help-query-gpu` lists them).
var gpuQuery = []string{
	"index", "name", "uuid", "pci.bus_id", "driver_version", "memory.total",
	"ecc.errors.uncorrected.volatile.total", "clocks_throttle_reasons.hw_slowdown",
}

// GPU is one GPU as nvidia-smi reports it.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	UUID      string `json:"uuid"`
	BusID     string `json:"pci_bus_id"`
	Driver    string `json:"driver_version"`
	MemoryMiB int    `json:"memory_mib"`
	// ECCUncorrected is the volatile uncorrectable ECC error count (nil: the
	// GPU has no ECC, or it is off).
	ECCUncorrected *int `json:"ecc_uncorrected,omitempty"`
	// HWSlowdown: the GPU throttles itself (power brake or overheating).
	HWSlowdown bool `json:"hw_slowdown,omitempty"`
	// Lost is nvidia-smi's word when the GPU does not answer ("[GPU is
	// lost]", "[Unknown Error]"), empty when it does.
	Lost string `json:"lost,omitempty"`
}

// NvidiaSMI reads the machine's GPUs with `nvidia-smi --query-gpu=...
// --format=csv,noheader,nounits`.
type NvidiaSMI struct {
	// Path is the tool (default: nvidia-smi on PATH).
	Path string
	// Timeout bounds one call (default 20s: a GPU that hangs the driver
	// makes nvidia-smi hang too).
	Timeout time.Duration
}

// ErrNoNvidiaSMI is answered by Query on a machine without nvidia-smi (no
// NVIDIA driver): it has no GPU to watch.
var ErrNoNvidiaSMI = errors.New("nvidia-smi not found")

// Query runs nvidia-smi and answers the GPUs. A tool that fails (exit
// status not 0: the driver cannot talk to a GPU) is an error.
func (n NvidiaSMI) Query(ctx context.Context) ([]GPU, error) {
	path := n.Path
	if path == "" {
		path = "nvidia-smi"
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return nil, ErrNoNvidiaSMI
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--query-gpu="+strings.Join(gpuQuery, ","), "--format=csv,noheader,nounits")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stdout.String() + " " + stderr.String())
		return nil, fmt.Errorf("nvidia-smi failed (%v): %s", err, tailOf([]byte(msg), 512))
	}
	return parseGPUs(stdout.Bytes())
}

// cudaBanner finds the CUDA version in the header plain nvidia-smi prints
// ("| NVIDIA-SMI 550.127.05   Driver Version: 550.127.05   CUDA Version: 12.4 |"):
// the highest CUDA version the driver supports. --query-gpu has no such
// field.
var cudaBanner = regexp.MustCompile(`CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)`)

// CUDAVersion runs plain nvidia-smi and answers the CUDA version of its
// header ("" when the header has none: a driver too old to print it).
func (n NvidiaSMI) CUDAVersion(ctx context.Context) (string, error) {
	path := n.Path
	if path == "" {
		path = "nvidia-smi"
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return "", ErrNoNvidiaSMI
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nvidia-smi failed (%v): %s", err, tailOf(out, 512))
	}
	return parseCUDAVersion(out), nil
}

// parseCUDAVersion reads the CUDA version of nvidia-smi's header.
func parseCUDAVersion(out []byte) string {
	if m := cudaBanner.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// parseGPUs reads nvidia-smi's CSV (no header, no units): one line per
// GPU, values separated by ", ", "[N/A]" for what the GPU lacks.
func parseGPUs(out []byte) ([]GPU, error) {
	rd := csv.NewReader(bytes.NewReader(out))
	rd.TrimLeadingSpace = true
	rd.FieldsPerRecord = -1
	recs, err := rd.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi output: %w", err)
	}
	var gpus []GPU
	for _, rec := range recs {
		if len(rec) != len(gpuQuery) {
			return nil, fmt.Errorf("nvidia-smi output: %d fields where %d were asked: %q", len(rec), len(gpuQuery), strings.Join(rec, ", "))
		}
		g := GPU{Name: rec[1], UUID: rec[2], BusID: rec[3], Driver: rec[4]}
		g.Index, _ = strconv.Atoi(rec[0])
		g.MemoryMiB, _ = strconv.Atoi(rec[5])
		if v, err := strconv.Atoi(rec[6]); err == nil {
			g.ECCUncorrected = &v
		}
		g.HWSlowdown = rec[7] == "Active"
		for _, v := range rec {
			if v == "[GPU is lost]" || v == "[Unknown Error]" || v == "[GPU requires reset]" {
				g.Lost = strings.Trim(v, "[]")
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// gpuProblem names what makes GPUs unfit for jobs (empty: healthy): a GPU
// lost or needing a reset, uncorrectable ECC errors, hardware slowdown, or
// fewer GPUs than the machine started with (one fell off the bus).
func gpuProblem(gpus []GPU, want int) string {
	var problems []string
	if len(gpus) < want {
		problems = append(problems, fmt.Sprintf("%d GPUs visible, %d at start (a GPU fell off the bus)", len(gpus), want))
	}
	for _, g := range gpus {
		switch {
		case g.Lost != "":
			problems = append(problems, fmt.Sprintf("GPU %d (%s): %s", g.Index, g.BusID, g.Lost))
		case g.ECCUncorrected != nil && *g.ECCUncorrected > 0:
			problems = append(problems, fmt.Sprintf("GPU %d (%s): %d uncorrectable ECC errors", g.Index, g.BusID, *g.ECCUncorrected))
		case g.HWSlowdown:
			problems = append(problems, fmt.Sprintf("GPU %d (%s): hardware slowdown (throttled)", g.Index, g.BusID))
		}
	}
	return strings.Join(problems, "; ")
}
