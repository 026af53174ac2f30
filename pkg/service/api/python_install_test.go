package api_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// clientVersion is the Python client's __version__, the one place its
// version is written (pyproject.toml reads it from there).
func clientVersion(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../../clients/python/fleetq/__init__.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^__version__ = "([^"]*)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("clients/python/fleetq/__init__.py sets no __version__")
	}
	return string(m[1])
}

// release is a version of the tag scheme, vX.Y.Z, as numbers.
func release(t *testing.T, v string) [3]int {
	t.Helper()
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("version %q is not of the release tags' form vX.Y.Z", v)
	}
	var r [3]int
	for i := range r {
		r[i], _ = strconv.Atoi(m[i+1])
	}
	return r
}

// The Python client's version is that of the release it belongs to: of
// the tags' form, not older than the newest release (the store's release
// fixtures are named for each), and on a commit tagged as a release, that
// release's.
func TestPythonClientVersionIsTheRelease(t *testing.T) {
	t.Parallel()
	v := "v" + clientVersion(t)
	got := release(t, v)
	fixtures, err := filepath.Glob("../../aws/store/testdata/release-v*")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no release fixtures in pkg/aws/store/testdata: %v", err)
	}
	for _, f := range fixtures {
		r := release(t, strings.TrimPrefix(filepath.Base(f), "release-"))
		if got[0] < r[0] || got[0] == r[0] && (got[1] < r[1] || got[1] == r[1] && got[2] < r[2]) {
			t.Errorf("the Python client's version %s is older than the release %s", v, filepath.Base(f))
		}
	}
	if tag, err := exec.Command("git", "describe", "--tags", "--exact-match", "--match", "v*").Output(); err == nil {
		if tag := strings.TrimSpace(string(tag)); tag != v {
			t.Errorf("this commit is the release %s; the Python client says %s", tag, v)
		}
	}
}

// withSetuptools answers a python3 that can build the client without the
// network: setuptools and wheel installed (pip's build isolation would
// fetch them).
func withSetuptools(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append([]string{p}, candidates...)
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", "import setuptools, wheel, venv, ensurepip").Run() == nil {
			return py
		}
	}
	testenv.Unavailable(t, "no python3 with pip, setuptools and wheel (Debian: apt-get install python3-pip python3-setuptools python3-wheel): the Python client's installation is not tested")
	return ""
}

// The Python client installs as a package: pip builds it from
// clients/python (a copy, so that no build output lands in the tree)
// without the network, into a fresh virtual environment, where it imports
// with its version from outside the source tree.
func TestPythonClientInstalls(t *testing.T) {
	t.Parallel()
	py := withSetuptools(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.CopyFS(src, os.DirFS("../../../clients/python")); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	venv := filepath.Join(dir, "venv")
	run(py, "-m", "venv", "--system-site-packages", "--without-pip", venv) // pip, setuptools and wheel: those of py
	vpy := filepath.Join(venv, "bin", "python")
	run(vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps", "--quiet", src)
	out := run(vpy, "-c", "import importlib.metadata as m, fleetq; print(fleetq.__version__, m.version('fleetq'), fleetq.__file__)")
	f := strings.Fields(out)
	want := clientVersion(t)
	if len(f) != 3 || f[0] != want || f[1] != want || !strings.HasPrefix(f[2], venv+string(filepath.Separator)) {
		t.Fatalf("the installed client answers %q; want version %s twice and a module in %s", out, want, venv)
	}
}
