package dynalite

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotInstalled is returned by Start when scripts/dynalite has no
// node_modules (make dynalite-deps installs them) or node is missing.
var ErrNotInstalled = errors.New("dynalite is not installed (make dynalite-deps, which needs npm)")

// TokenWindow is how long a committed transaction's ClientRequestToken is
// remembered, as DynamoDB documents for TransactWriteItems (transact.js's
// TOKEN_WINDOW_MS).
const TokenWindow = 10 * time.Minute

// Server is dynalite with its transactions, in a node process of its own.
type Server struct {
	// URL is its endpoint.
	URL string

	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// Dir returns scripts/dynalite of the module that holds the working
// directory (a package directory under go test).
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "dynalite"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start starts dynalite, in memory, with its transactions, from dir (see
// Dir). dynalite exits when Close is called, when this process ends,
// or when the Server is garbage collected (its stdin pipe closes then): keep
// it referenced for as long as it serves.
func Start(dir string) (*Server, error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "dynalite", "package.json")); err != nil {
		return nil, ErrNotInstalled
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, ErrNotInstalled
	}
	cmd := exec.Command(node, "serve.js")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dynalite: %w", err)
	}
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(port)
	}()
	kill := func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }
	var p string
	select {
	case got, ok := <-port:
		if !ok {
			kill()
			return nil, errors.New("dynalite exited before it listened")
		}
		p = got
	case <-time.After(30 * time.Second):
		kill()
		return nil, errors.New("dynalite did not listen within 30s")
	}
	return &Server{URL: "http://127.0.0.1:" + p, cmd: cmd, stdin: stdin}, nil
}

// AdvanceClock moves the clock of the transactions' token window on by d,
// for tests of the window.
func (s *Server) AdvanceClock(d time.Duration) error {
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(fmt.Sprintf(`{"Milliseconds":%d}`, d.Milliseconds())))
	if err != nil {
		return err
	}
	req.Header.Set("X-Amz-Target", "FleetqDynalite.AdvanceClock")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("advance dynalite's clock: %s %s", res.Status, body)
	}
	return nil
}

// Close stops dynalite.
func (s *Server) Close() {
	_ = s.stdin.Close()
	_ = s.cmd.Wait()
}
