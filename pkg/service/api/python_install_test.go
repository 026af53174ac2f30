package api_test

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"io"
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

// venvPython answers a python3 whose venv module can make a virtual
// environment with pip in it (ensurepip, which installs pip from the wheel
// Python ships, with no network).
func venvPython(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append([]string{p}, candidates...)
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", "import venv, ensurepip, zipfile, hashlib").Run() == nil {
			return py
		}
	}
	testenv.Unavailable(t, "no python3 with venv and ensurepip (Debian: apt-get install python3-venv): the Python client's installation is not tested")
	return ""
}

// The Python client installs with no network: clients/python/build_wheel.py
// (make wheel) writes its wheel with the standard library alone, every file
// in it is the one its RECORD names, with that SHA-256 and size, and pip
// installs it with --no-index into a fresh virtual environment (pip from
// ensurepip, nothing else), where it imports with its version from outside
// the source tree.
func TestPythonClientInstalls(t *testing.T) {
	t.Parallel()
	py := venvPython(t)
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INDEX=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	script, err := filepath.Abs("../../../clients/python/build_wheel.py")
	if err != nil {
		t.Fatal(err)
	}
	want := clientVersion(t)
	whl := strings.TrimSpace(run(py, script, "--out", filepath.Join(dir, "dist")))
	if filepath.Base(whl) != "fleetq-"+want+"-py3-none-any.whl" {
		t.Fatalf("build_wheel.py wrote %q; want dist/fleetq-%s-py3-none-any.whl", whl, want)
	}
	checkWheelRecord(t, whl, "fleetq-"+want+".dist-info")

	venv := filepath.Join(dir, "venv")
	run(py, "-m", "venv", venv)
	vpy := filepath.Join(venv, "bin", "python")
	run(vpy, "-m", "pip", "install", "--no-index", "--quiet", whl)
	out := run(vpy, "-c", "import importlib.metadata as m, fleetq; print(fleetq.__version__, m.version('fleetq'), fleetq.__file__)")
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != want || f[1] != want || !strings.HasPrefix(f[2], venv+string(filepath.Separator)) {
		t.Fatalf("the installed client answers %q; want version %s twice and a module in %s", out, want, venv)
	}
}

// checkWheelRecord reads a wheel as the binary distribution format defines
// it: its dist-info has METADATA, WHEEL (pure Python, py3-none-any) and
// RECORD, which lists every other file of the archive with its sha256
// (urlsafe base64, no padding) and size.
func checkWheelRecord(t *testing.T, whl, distInfo string) {
	t.Helper()
	z, err := zip.OpenReader(whl)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = data
	}
	for _, name := range []string{"fleetq/__init__.py", "fleetq/py.typed", distInfo + "/METADATA", distInfo + "/WHEEL", distInfo + "/RECORD"} {
		if _, ok := files[name]; !ok {
			t.Errorf("the wheel has no %s", name)
		}
	}
	wheel := string(files[distInfo+"/WHEEL"])
	for _, line := range []string{"Wheel-Version: 1.0", "Root-Is-Purelib: true", "Tag: py3-none-any"} {
		if !strings.Contains(wheel, line+"\n") {
			t.Errorf("WHEEL has no %q:\n%s", line, wheel)
		}
	}
	if md := string(files[distInfo+"/METADATA"]); !strings.Contains(md, "Name: fleetq\n") || !strings.Contains(md, "Requires-Python: ") {
		t.Errorf("METADATA names no fleetq or no Requires-Python:\n%.300s", md)
	}
	recorded := map[string]bool{}
	for _, row := range strings.Split(strings.TrimSpace(string(files[distInfo+"/RECORD"])), "\n") {
		cols := strings.Split(row, ",")
		if len(cols) != 3 {
			t.Errorf("RECORD row %q: want path,hash,size", row)
			continue
		}
		recorded[cols[0]] = true
		if cols[0] == distInfo+"/RECORD" {
			if cols[1] != "" || cols[2] != "" {
				t.Errorf("RECORD's own row %q has a hash or a size", row)
			}
			continue
		}
		data, ok := files[cols[0]]
		sum := sha256.Sum256(data)
		if !ok || cols[1] != "sha256="+base64.RawURLEncoding.EncodeToString(sum[:]) || cols[2] != strconv.Itoa(len(data)) {
			t.Errorf("RECORD row %q: the archive's file has sha256=%s and %d bytes (in the archive: %v)", row, base64.RawURLEncoding.EncodeToString(sum[:]), len(data), ok)
		}
	}
	for name := range files {
		if !recorded[name] {
			t.Errorf("%s is in the wheel but not in its RECORD", name)
		}
	}
}
