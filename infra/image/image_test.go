package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// scripts are the shell scripts of the image build: the install scripts
// and the example hook.
func scripts(t *testing.T) []string {
	t.Helper()
	out, err := filepath.Glob("*.sh")
	if err != nil {
		t.Fatal(err)
	}
	hooks, _ := filepath.Glob("hooks/*.example")
	out = append(out, hooks...)
	if len(out) < 5 {
		t.Fatalf("found only %v", out)
	}
	return out
}

func TestScriptsParse(t *testing.T) {
	for _, s := range scripts(t) {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
}

// TestShellcheck runs shellcheck over every script. Without shellcheck the
// test skips, except under CI (CI set, not to false or 0), where it fails (make test installs it:
// the Makefile's shellcheck-deps).
func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("shellcheck is not installed (make shellcheck-deps installs Debian's package)")
		}
		t.Skip("shellcheck is not installed: make shellcheck-deps (or apt-get install shellcheck)")
	}
	args := append([]string{"--shell=bash", "--severity=style"}, scripts(t)...)
	if out, err := exec.Command(sc, args...).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}

// standIns writes the commands the scripts call on a build instance —
// git, python3 -m venv (whose pip it makes), systemctl — each recording
// its arguments in log, and answers the directory holding them.
func standIns(t *testing.T, log string) string {
	t.Helper()
	bin := t.TempDir()
	files := map[string]string{
		"git": `#!/bin/bash
set -e
echo "git $*" >> "$STANDIN_LOG"
if [ "$1" = clone ]; then
  mkdir -p "$4/.git"; echo "print('comfyui')" > "$4/main.py"; echo "aiohttp" > "$4/requirements.txt"; exit 0
fi
dir=$2; shift 2
case $1 in
  fetch) ;;
  checkout) echo "${@: -1}" > "$dir/.git/ref" ;;
  rev-parse) printf '%040d\n' "$(wc -c < "$dir/.git/ref")" ;;
  *) echo "git stand-in: $1 unknown" >&2; exit 1 ;;
esac
`,
		"python3": `#!/bin/bash
set -e
echo "python3 $*" >> "$STANDIN_LOG"
[ "$1 $2" = "-m venv" ] || { echo "python3 stand-in: only -m venv" >&2; exit 1; }
mkdir -p "$3/bin"
printf '#!/bin/bash\necho python "$@"\n' > "$3/bin/python"
printf '#!/bin/bash\necho "pip $*" >> "$STANDIN_LOG"\nmkdir -p "%s/lib"\necho "$*" >> "%s/lib/installed"\nsort -u -o "%s/lib/installed" "%s/lib/installed"\n' "$3" "$3" "$3" "$3" > "$3/bin/pip"
chmod +x "$3/bin/python" "$3/bin/pip"
`,
		"systemctl": "#!/bin/bash\necho \"systemctl $*\" >> \"$STANDIN_LOG\"\n",
		"aws":       "#!/bin/bash\necho \"aws $*\" >> \"$STANDIN_LOG\"\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// run runs a script with the stand-ins first on PATH, in root.
func run(t *testing.T, root, bin, log string, env []string, script string, args ...string) string {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{abs}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FLEETQ_IMAGE_ROOT="+root, "STANDIN_LOG="+log)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", script, args, err, out)
	}
	return string(out)
}

// tree is every file under root with its mode and content digest.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel] = info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = info.Mode().String() + " " + hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q then %q", k, v, b[k]))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+": new on the second run")
		}
	}
	slices.Sort(out)
	return out
}

// Every install step, run twice in a scratch root with stand-ins for git,
// pip and systemctl, leaves the same tree, and does what the image needs:
// the agent verified and installed, ComfyUI at the ref with its
// requirements and an enabled unit, the hooks run in order.
func TestInstallIsIdempotent(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "calls")
	bin := standIns(t, log)
	agent := filepath.Join(t.TempDir(), "fleetq")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\necho 'fleetq v1.2.3'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(agent)
	sum := sha256.Sum256(data)
	hooks := filepath.Join(root, "opt/fleetq/image.d")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"10-models":   "#!/bin/bash\nset -e\nmkdir -p \"$COMFYUI_DIR/models/checkpoints\"\necho weights > \"$COMFYUI_DIR/models/checkpoints/tiny.safetensors\"\necho 10 >> \"$STANDIN_LOG\"\n",
		"20-nodes":    "#!/bin/bash\nset -e\n\"$COMFYUI_PIP\" install -r nodes.txt\necho 20 >> \"$STANDIN_LOG\"\n",
		"30-disabled": "#!/bin/bash\nexit 1\n",
	} {
		mode := os.FileMode(0o755)
		if name == "30-disabled" {
			mode = 0o644 // not executable: not run
		}
		if err := os.WriteFile(filepath.Join(hooks, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	comfy := []string{"COMFYUI_REF=v0.3.66", "PYTHON=python3"}
	install := func() {
		run(t, root, bin, log, nil, "install-agent.sh", agent, hex.EncodeToString(sum[:]))
		run(t, root, bin, log, comfy, "install-comfyui.sh")
		run(t, root, bin, log, nil, "run-hooks.sh")
	}
	install()
	first := tree(t, root)
	calls, _ := os.ReadFile(log)
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	install()
	if d := diff(first, tree(t, root)); len(d) > 0 {
		t.Fatalf("the second run changed the image:\n%s", strings.Join(d, "\n"))
	}

	for path, want := range map[string]string{
		"usr/local/bin/fleetq":                            "fleetq v1.2.3",
		"opt/comfyui/.git/ref":                            "v0.3.66",
		"opt/comfyui/.fleetq-commit":                      "0000000000000000000000000000000000000008",
		"etc/systemd/system/comfyui.service":              "ExecStart=/opt/comfyui/venv/bin/python main.py --listen 127.0.0.1 --port 8188",
		"opt/comfyui/venv/lib/installed":                  "install --quiet -r " + root + "/opt/comfyui/requirements.txt",
		"opt/comfyui/models/checkpoints/tiny.safetensors": "weights",
	} {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %q (%v), want it to hold %q", path, b, err, want)
		}
	}
	for _, re := range []string{
		`(?m)^git clone --quiet https://github.com/comfyanonymous/ComfyUI.git ` + regexp.QuoteMeta(root) + `/opt/comfyui$`,
		`(?m)^python3 -m venv `,
		`(?m)^systemctl enable comfyui.service$`,
		`(?m)^10\n(.*\n)*20$`,
	} {
		if !regexp.MustCompile(re).Match(calls) {
			t.Errorf("the first run's calls lack %s:\n%s", re, calls)
		}
	}
	again, _ := os.ReadFile(log)
	if strings.Contains(string(again), "git clone") || strings.Contains(string(again), "-m venv") {
		t.Errorf("the second run cloned or made the environment again:\n%s", again)
	}
}

// The agent is refused when its digest does not match, and nothing is
// installed.
func TestInstallAgentRefusesAnotherDigest(t *testing.T) {
	root := t.TempDir()
	agent := filepath.Join(t.TempDir(), "fleetq")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("install-agent.sh")
	cmd := exec.Command("bash", abs, agent, strings.Repeat("ab", 32))
	cmd.Env = append(os.Environ(), "FLEETQ_IMAGE_ROOT="+root)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not have the SHA-256") {
		t.Fatalf("install-agent with the wrong digest: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/local/bin/fleetq")); err == nil {
		t.Fatal("the agent was installed anyway")
	}
}

// publish-ami puts the image id into the fleet's parameter, typed as an
// EC2 image id (so SSM checks it names an image), and refuses anything else.
func TestPublishAMI(t *testing.T) {
	log := filepath.Join(t.TempDir(), "calls")
	bin := standIns(t, log)
	run(t, t.TempDir(), bin, log, nil, "publish-ami.sh", "/fleetq/prod/comfyui-ami", "ami-0123456789abcdef0", "us-east-1")
	calls, _ := os.ReadFile(log)
	want := "aws ssm put-parameter --name /fleetq/prod/comfyui-ami --type String --data-type aws:ec2:image --overwrite --value ami-0123456789abcdef0 --region us-east-1\n"
	if string(calls) != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", calls, want)
	}
	abs, _ := filepath.Abs("publish-ami.sh")
	cmd := exec.Command("bash", abs, "/fleetq/prod/comfyui-ami", "snap-1")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STANDIN_LOG="+log)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not an image id") {
		t.Fatalf("a snapshot id: %v\n%s", err, out)
	}
}

// The Packer template runs the scripts that are here, and names the
// agent where make build puts it.
func TestPackerTemplateUsesTheseScripts(t *testing.T) {
	hcl, err := os.ReadFile("fleetq-worker.pkr.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"install-agent.sh", "install-comfyui.sh", "run-hooks.sh", "publish-ami.sh"} {
		if !strings.Contains(string(hcl), "infra/image/"+s) {
			t.Errorf("the template does not use %s", s)
		}
		if _, err := os.Stat(s); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(string(hcl), `default = "bin/agent/amd64/fleetq"`) {
		t.Error("the template's agent_binary is not make build's bin/agent/amd64/fleetq")
	}
}
