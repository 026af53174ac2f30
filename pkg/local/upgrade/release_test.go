package upgrade_test

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// release is one line of releases.txt: a version and the commit it was built from.
type release struct {
	Version, Commit string
}

// repoRoot is the repository's root, from this package's directory.
var repoRoot = filepath.Join("..", "..", "..")

var (
	versionPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)
	commitPattern  = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// readReleases reads releases.txt: blank lines and # comments aside, each
// line a version and its commit's full hash, oldest first.
func readReleases(path string) ([]release, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []release
	seen := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			return nil, fmt.Errorf("%s:%d: want a version and a commit, got %q", path, i+1, line)
		case !versionPattern.MatchString(f[0]):
			return nil, fmt.Errorf("%s:%d: %q is not a version vX.Y.Z", path, i+1, f[0])
		case !commitPattern.MatchString(f[1]):
			return nil, fmt.Errorf("%s:%d: %q is not a commit's full hash (git rev-parse)", path, i+1, f[1])
		case seen[f[0]]:
			return nil, fmt.Errorf("%s:%d: %s is recorded twice", path, i+1, f[0])
		}
		seen[f[0]] = true
		out = append(out, release{Version: f[0], Commit: f[1]})
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no release recorded")
	}
	return out, nil
}

// The releases file names each release once, with its commit's full hash,
// and the commit of every release is in this repository's history when the
// history is there (a full clone).
func TestReleasesFileNamesEachReleasesCommit(t *testing.T) {
	t.Parallel()
	rs, err := readReleases(filepath.Join(repoRoot, "releases.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !hasHistory() {
		t.Log("no git history here: the commits are not checked")
		return
	}
	for _, r := range rs {
		if err := exec.Command("git", "-C", repoRoot, "cat-file", "-e", r.Commit+"^{commit}").Run(); err != nil {
			if shallow() {
				continue
			}
			t.Errorf("release %s: commit %s is not in this repository's history", r.Version, r.Commit)
		}
	}
}

func TestReadReleasesRefusesMalformedLines(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"v0.1.0\n",
		"v0.1.0 72ed7cb\n",
		"0.1.0 72ed7cb5d236378376d5a1bd9a9a24c534e3a640\n",
		"v0.1.0 72ed7cb5d236378376d5a1bd9a9a24c534e3a640\nv0.1.0 72ed7cb5d236378376d5a1bd9a9a24c534e3a640\n",
		"# nothing\n",
	} {
		p := filepath.Join(t.TempDir(), "releases.txt")
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readReleases(p); err == nil {
			t.Errorf("%q: read without an error", bad)
		}
	}
}

// hasHistory reports whether the repository is a git checkout git can read.
func hasHistory() bool {
	if _, err := exec.LookPath("git"); err != nil {
		return false
	}
	return exec.Command("git", "-C", repoRoot, "rev-parse", "--git-dir").Run() == nil
}

// shallow reports whether the checkout is a shallow clone.
func shallow() bool {
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "--is-shallow-repository").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// previousRelease is the last release of releases.txt.
func previousRelease(t *testing.T) release {
	t.Helper()
	rs, err := readReleases(filepath.Join(repoRoot, "releases.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return rs[len(rs)-1]
}

// buildRelease builds r's fleetq (the `fleetq dev` stack and the `fleetq
// worker` agent in one binary) from the repository's history: git archive
// of the commit's module, then one go build in the tests' own build
// configuration (GOFLAGS and CGO_ENABLED from the environment, the race
// detector when the test has it), so the dependencies the two releases
// share come from the compile cache and only fleetq's own packages of the
// release compile; the binary is linked without its symbol table and DWARF
// (-s -w), a third of the link, which under -race is most of the build once
// the compile is cached. Without the commit (no git, a shallow clone) the test
// skips, and fails under CI (testenv.Unavailable).
func buildRelease(t *testing.T, r release) string {
	t.Helper()
	if !hasHistory() {
		testenv.Unavailable(t, "no git history to build release "+r.Version+" from (not a git checkout, or no git)")
	}
	if err := exec.Command("git", "-C", repoRoot, "cat-file", "-e", r.Commit+"^{commit}").Run(); err != nil {
		why := "release " + r.Version + "'s commit " + r.Commit + " is not in this clone's history"
		if shallow() {
			why += " (a shallow clone: git fetch --unshallow)"
		}
		testenv.Unavailable(t, why)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	archive := exec.Command("git", "-C", repoRoot, "archive", "--format=tar", r.Commit, "go.mod", "go.sum", "cmd", "pkg", "config")
	stdout, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	xerr := extract(stdout, src)
	if err := archive.Wait(); err != nil || xerr != nil {
		t.Fatalf("git archive %s: %v %v\n%s", r.Commit, err, xerr, stderr.String())
	}
	bin := filepath.Join(dir, "fleetq-"+r.Version)
	args := []string{"build", "-o", bin, "-ldflags", "-s -w -X github.com/fleetq/fleetq/pkg/lib/version.Version=" + r.Version}
	if testenv.Race {
		args = append(args, "-race")
	}
	build := exec.Command(goBinary(), append(args, "./cmd/fleetq")...)
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build release %s (%s): %v\n%s", r.Version, r.Commit, err, out)
	}
	return bin
}

// goBinary is the go command of the toolchain running the tests, as
// testenv.BuildBinary finds it.
func goBinary() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// extract writes a tar stream's directories and regular files under dir.
func extract(r io.Reader, dir string) error {
	tr := tar.NewReader(bufio.NewReader(r))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q leaves its directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, cerr := io.Copy(f, tr)
			if err := errors.Join(cerr, f.Close()); err != nil {
				return err
			}
		}
	}
}
