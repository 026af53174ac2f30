package dynalite

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// ErrNotInstalled is returned by Start when scripts/dynalite has no
// node_modules (make dynalite-deps installs them) or node is missing.
var ErrNotInstalled = errors.New("dynalite is not installed (make dynalite-deps, which needs npm)")

// Server is dynalite with the shim in front of it.
type Server struct {
	// URL is the shim's endpoint: the one clients use.
	URL string
	// Dynalite is dynalite's own endpoint, without transactions.
	Dynalite string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	shim  *httptest.Server
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

// Start starts dynalite, in memory, from dir (see Dir) and the shim in
// front of it. dynalite exits when Close is called, when this process ends,
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
	s := &Server{Dynalite: "http://127.0.0.1:" + p, cmd: cmd, stdin: stdin}
	shim, err := NewShim(s.Dynalite, clock.Real{})
	if err != nil {
		kill()
		return nil, err
	}
	s.shim = httptest.NewServer(shim)
	s.URL = s.shim.URL
	return s, nil
}

// Close stops the shim and dynalite.
func (s *Server) Close() {
	s.shim.Close()
	_ = s.stdin.Close()
	_ = s.cmd.Wait()
}
