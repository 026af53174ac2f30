package infra_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/infra"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// The boot script each launch template gives its instances, taken from the
// synthesized template and resolved as CloudFormation would (Fn::Sub and
// the intrinsics of its variables), runs under bash in a scratch root
// with stand-ins for the AWS CLI, systemd and the metadata service
// (IMDSv2, served on loopback): it fetches the agent of the fleet's
// architecture, checks its digest, installs the unit with the fleet's
// settings and starts it; an agent with another digest, or none, marks the
// instance unhealthy through the metadata service's instance id and
// starts nothing.
func TestBootScriptRunsInAScratchRoot(t *testing.T) {
	_, devRaw, err := infra.LoadConfig("dev", "")
	if err != nil {
		t.Fatal(err)
	}
	// The dev config on Graviton: the arm64 agent, the arm64 image.
	armText := regexp.MustCompile(`instance_types: \[[^\]]*\]`).ReplaceAllString(string(devRaw), "instance_types: [g5g.xlarge, g5g.2xlarge]")
	armText = strings.ReplaceAll(armText, "/ami/x86_64/", "/ami/arm64/")
	arm, err := fleetconfig.Parse("arm.yaml", []byte(armText))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := infra.FleetArch(arm.Fleets[0]); err != nil || a != "arm64" {
		t.Fatalf("the arm64 variant's first fleet is %s (%v)", a, err)
	}
	stages := []struct {
		name string
		s    func() synthesized
	}{
		{"dev", func() synthesized { return synth(t, "dev") }},
		{"prod", func() synthesized { return synth(t, "prod") }},
		{"dev-arm64", func() synthesized { return synthConfig(t, "dev-arm64", arm, []byte(armText)) }},
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, st := range stages {
		s := st.s()
		booted := map[string]bool{}
		for id, lt := range s.resources("AWS::EC2::LaunchTemplate") {
			script := resolveUserData(t, s, lt["LaunchTemplateData"].(map[string]any)["UserData"])
			fleet := scriptFleet(t, s, script)
			booted[fleet.Slug] = true
			t.Run(st.name+"/"+id, func(t *testing.T) { bootScript(t, s, fleet, script) })
		}
		for _, f := range s.cfg.Fleets {
			if !booted[f.Slug] {
				t.Errorf("%s: no launch template boots fleet %s (booted %v)", st.name, f.Slug, booted)
			}
		}
	}
}

// scriptFleet is the config's fleet a boot script starts the agent for.
func scriptFleet(t *testing.T, s synthesized, script string) fleetconfig.Fleet {
	t.Helper()
	m := regexp.MustCompile(`(?m)^Environment="FLEETQ_FLEET=([^"]+)"$`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the boot script sets no FLEETQ_FLEET:\n%s", script)
	}
	for _, f := range s.cfg.Fleets {
		if f.Slug == m[1] {
			return f
		}
	}
	t.Fatalf("the boot script's fleet %q is not in the config", m[1])
	return fleetconfig.Fleet{}
}

// bootScript shellchecks one resolved boot script of fleet and runs it
// through its cases.
func bootScript(t *testing.T, s synthesized, fleet fleetconfig.Fleet, script string) {
	t.Helper()
	shellcheckScript(t, script)
	arch, err := infra.FleetArch(fleet)
	if err != nil {
		t.Fatal(err)
	}
	// The stack's agent assets, as the bucket holds them.
	objects := map[string][]byte{}
	for a := range s.stack.Agents {
		objects[outputValue(t, s, "Agent"+strings.ToUpper(a[:1])+a[1:]+"Url")] = agentBody(a)
	}
	agentURL := ""
	for u, body := range objects {
		if bytes.Equal(body, agentBody(arch)) {
			agentURL = u
		}
	}
	if agentURL == "" {
		t.Fatalf("no %s agent among the stack's assets %v", arch, s.stack.Agents)
	}

	t.Run("starts the agent", func(t *testing.T) {
		b := newBoot(t, objects, true)
		code, out := b.run(t, script)
		if code != 0 {
			t.Fatalf("exit %d\n%s\ncalls:\n%s", code, out, b.calls(t))
		}
		calls := b.calls(t)
		// The agent of the fleet's architecture, fetched once from the
		// stack's asset, installed executable and run.
		if want := fmt.Sprintf("aws s3 cp --only-show-errors %s %s/usr/local/bin/fleetq.new [AWS_REGION=%s]", agentURL, b.root, s.cfg.Region); !slices.Contains(calls, want) {
			t.Errorf("the agent is not fetched as %q:\n%s", want, strings.Join(calls, "\n"))
		}
		got, err := os.ReadFile(filepath.Join(b.root, "usr/local/bin/fleetq"))
		if err != nil || !bytes.Equal(got, agentBody(arch)) {
			t.Errorf("installed agent %q (%v), want the %s one", got, err, arch)
		}
		if fi, err := os.Stat(filepath.Join(b.root, "usr/local/bin/fleetq")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("installed agent mode %v (%v), want 0755", fi, err)
		}
		if _, err := os.Stat(filepath.Join(b.root, "usr/local/bin/fleetq.new")); !os.IsNotExist(err) {
			t.Errorf("the download is left behind: %v", err)
		}
		if !strings.Contains(out, "fleetq test agent "+arch) {
			t.Errorf("the boot did not run the %s agent's version:\n%s", arch, out)
		}
		// The unit: written before it is enabled and started.
		if i, j := slices.Index(calls, "systemctl daemon-reload"), slices.Index(calls, "systemctl enable --now fleetq-worker [unit present]"); i < 0 || j < i {
			t.Errorf("systemd calls, want daemon-reload then enable --now fleetq-worker with the unit written:\n%s", strings.Join(calls, "\n"))
		}
		unit, err := os.ReadFile(filepath.Join(b.root, "etc/systemd/system/fleetq-worker.service"))
		if err != nil {
			t.Fatal(err)
		}
		env, lines := unitSettings(string(unit))
		runner := fleet.Agent.Runner
		if runner == "" {
			runner = "exec"
		}
		want := map[string]string{
			"FLEETQ_API":             outputValue(t, s, "ApiUrl"),
			"FLEETQ_FLEET":           fleet.Slug,
			"FLEETQ_STAGE":           s.cfg.Stage,
			"FLEETQ_RUNNER":          runner,
			"FLEETQ_MAX_CONCURRENCY": strconv.Itoa(max(1, fleet.SlotsPerInstance)),
			"FLEETQ_DRAIN_TIMEOUT":   fleet.Agent.DrainTimeout.String(),
			"AWS_REGION":             s.cfg.Region,
		}
		if fleet.Agent.Exec != "" {
			want["FLEETQ_EXEC"] = fleet.Agent.Exec
		}
		if fleet.Agent.ComfyUIURL != "" {
			want["FLEETQ_COMFYUI_URL"] = fleet.Agent.ComfyUIURL
		}
		if w := fleet.Agent.Warmup; w.Enabled() {
			switch {
			case w.Workflow != "":
				want["FLEETQ_WARMUP_WORKFLOW"] = w.Workflow
			case w.Exec != "":
				want["FLEETQ_WARMUP_EXEC"] = w.Exec
			default:
				want["FLEETQ_WARMUP_INPUT"] = string(w.InputJSON())
			}
			want["FLEETQ_WARMUP_TIMEOUT"] = w.Timeout.String()
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("unit %s = %q, want %q", k, env[k], v)
			}
		}
		for k := range env {
			if _, ok := want[k]; !ok {
				t.Errorf("unit sets %s=%q, which the test does not expect (a secret?)", k, env[k])
			}
		}
		for _, l := range []string{"ExecStart=/usr/local/bin/fleetq worker", "Restart=on-failure", "RestartPreventExitStatus=3",
			"StandardOutput=append:/var/log/fleetq/worker.log", "WantedBy=multi-user.target"} {
			if !slices.Contains(lines, l) {
				t.Errorf("unit lacks %s:\n%s", l, unit)
			}
		}
		// Logs: the CloudWatch agent started on the fleet's log group.
		if want := "amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s -c file:" + b.root + "/etc/fleetq/cloudwatch-agent.json"; !slices.Contains(calls, want) {
			t.Errorf("the CloudWatch agent is not started as %q:\n%s", want, strings.Join(calls, "\n"))
		}
		cw, err := os.ReadFile(filepath.Join(b.root, "etc/fleetq/cloudwatch-agent.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cwCfg struct {
			Logs struct {
				Collected struct {
					Files struct {
						List []struct {
							Path  string `json:"file_path"`
							Group string `json:"log_group_name"`
						} `json:"collect_list"`
					} `json:"files"`
				} `json:"logs_collected"`
			} `json:"logs"`
		}
		if err := json.Unmarshal(cw, &cwCfg); err != nil {
			t.Fatalf("CloudWatch agent config %s: %v", cw, err)
		}
		list := cwCfg.Logs.Collected.Files.List
		if len(list) != 2 || list[0].Path != "/var/log/fleetq/boot.log" || list[1].Path != "/var/log/fleetq/worker.log" {
			t.Errorf("CloudWatch agent collects %+v", list)
		}
		for _, l := range list {
			if !regexp.MustCompile(`^ref:` + camelSlug(fleet.Slug) + `WorkerLogs[0-9A-F]{8}$`).MatchString(l.Group) {
				t.Errorf("CloudWatch agent ships %s to %q, not fleet %s's log group", l.Path, l.Group, fleet.Slug)
			}
		}
		log, err := os.ReadFile(filepath.Join(b.root, "var/log/fleetq/boot.log"))
		if err != nil || !strings.Contains(string(log), "fleetq test agent "+arch) {
			t.Errorf("boot.log %q (%v) lacks the agent's version", log, err)
		}
		for _, c := range calls {
			if strings.Contains(c, "set-instance-health") || strings.HasPrefix(c, "shutdown") || strings.HasPrefix(c, "sleep") || strings.HasPrefix(c, "dnf") {
				t.Errorf("a good boot called %s", c)
			}
		}
		if n := len(b.imds.log()); n != 0 {
			t.Errorf("a good boot asked the metadata service %d times", n)
		}
	})

	t.Run("refuses an agent with another digest", func(t *testing.T) {
		tampered := map[string][]byte{}
		for u := range objects {
			tampered[u] = []byte("#!/bin/sh\necho not the agent\n")
		}
		b := newBoot(t, tampered, false)
		code, out := b.run(t, script)
		sum := sha256.Sum256(agentBody(arch))
		if code == 0 || !strings.Contains(out, "does not have the SHA-256 "+hex.EncodeToString(sum[:])) {
			t.Fatalf("exit %d, want a refusal naming the digest\n%s", code, out)
		}
		b.wantUnhealthy(t)
		if _, err := os.Stat(filepath.Join(b.root, "usr/local/bin/fleetq")); !os.IsNotExist(err) {
			t.Errorf("the tampered agent was installed: %v", err)
		}
		// No CloudWatch agent on this root: the package managers are asked.
		if calls := b.calls(t); !slices.Contains(calls, "dnf install -y -q amazon-cloudwatch-agent") || !strings.Contains(out, "no CloudWatch agent on this AMI") {
			t.Errorf("without the CloudWatch agent: calls %v\n%s", calls, out)
		}
	})

	t.Run("gives up when the agent cannot be fetched", func(t *testing.T) {
		b := newBoot(t, nil, true)
		code, out := b.run(t, script)
		if code == 0 || !strings.Contains(out, "could not download the agent from "+agentURL) {
			t.Fatalf("exit %d, want a failed download\n%s", code, out)
		}
		calls := b.calls(t)
		fetches := 0
		for _, c := range calls {
			if strings.HasPrefix(c, "aws s3 cp") {
				fetches++
			}
		}
		if fetches != 5 {
			t.Errorf("%d downloads, want 5 tries:\n%s", fetches, strings.Join(calls, "\n"))
		}
		b.wantUnhealthy(t)
	})
}

// shellcheckScript runs shellcheck over the script; without shellcheck it
// only logs, except under CI, where it fails (make shellcheck-deps installs
// it).
func shellcheckScript(t *testing.T, script string) {
	t.Helper()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("shellcheck is not installed (make shellcheck-deps installs Debian's package)")
		}
		t.Log("shellcheck is not installed: make shellcheck-deps (or apt-get install shellcheck)")
		return
	}
	path := filepath.Join(t.TempDir(), "user-data.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sc, "--shell=bash", "--severity=style", path).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// boot is one run of a boot script: its scratch root, the stand-ins' log
// and the metadata service.
type boot struct {
	root, bin, log, bucket string
	imds                   *fakeIMDS
}

// newBoot prepares a scratch root (with the directories an AMI has, and the
// CloudWatch agent when cwAgent), stand-ins for the AWS CLI, systemctl,
// the package managers, sleep and shutdown, a bucket holding objects (by
// s3:// URL) and a metadata service.
func newBoot(t *testing.T, objects map[string][]byte, cwAgent bool) *boot {
	t.Helper()
	dir := t.TempDir()
	b := &boot{root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "calls"), bucket: filepath.Join(dir, "s3"), imds: newFakeIMDS(t)}
	for _, d := range []string{"etc/systemd/system", "usr/local/bin", "var/log"} {
		if err := os.MkdirAll(filepath.Join(b.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for u, body := range objects {
		p := filepath.Join(b.bucket, strings.TrimPrefix(u, "s3://"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	record := `echo "$(basename "$0") $*" >> "$STANDIN_LOG"` + "\n"
	standIns := map[string]string{
		"aws": `echo "aws $* [AWS_REGION=$AWS_REGION]" >> "$STANDIN_LOG"
case "$1 $2" in
"s3 cp")
  shift 2
  if [ "$1" = --only-show-errors ]; then shift; fi
  obj="$STANDIN_S3/${1#s3://}"
  if [ ! -f "$obj" ]; then echo "fatal error: An error occurred (404) when calling the HeadObject operation: Not Found" >&2; exit 1; fi
  cp "$obj" "$2" ;;
"autoscaling set-instance-health") ;;
*) echo "aws stand-in: $1 $2 is not served" >&2; exit 2 ;;
esac
`,
		"systemctl": `if [ "$1 $2" = "enable --now" ] && [ -f "$FLEETQ_BOOT_ROOT/etc/systemd/system/$3.service" ]; then
  echo "systemctl $* [unit present]" >> "$STANDIN_LOG"
else
  echo "systemctl $*" >> "$STANDIN_LOG"
fi
`,
		"dnf":      record + "exit 1\n",
		"yum":      record + "exit 1\n",
		"sleep":    record,
		"shutdown": record,
	}
	if err := os.MkdirAll(b.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range standIns {
		if err := os.WriteFile(filepath.Join(b.bin, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if cwAgent {
		cw := filepath.Join(b.root, "opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl")
		if err := os.MkdirAll(filepath.Dir(cw), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cw, []byte("#!/bin/bash\n"+record), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// run runs script with bash in the scratch root, with nothing of the
// test's environment but PATH (the stand-ins first), and answers its exit
// status and output (which the script also tees to its boot.log).
func (b *boot) run(t *testing.T, script string) (int, string) {
	t.Helper()
	path := filepath.Join(filepath.Dir(b.root), "user-data.sh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", path)
	cmd.Env = []string{"PATH=" + b.bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + b.root,
		"FLEETQ_BOOT_ROOT=" + b.root, "FLEETQ_IMDS_URL=" + b.imds.url,
		"STANDIN_LOG=" + b.log, "STANDIN_S3=" + b.bucket}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// calls are the stand-ins' calls in order.
func (b *boot) calls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(b.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// wantUnhealthy checks a failed boot: the instance id read from the
// metadata service with a session token, the instance marked unhealthy,
// and no unit started.
func (b *boot) wantUnhealthy(t *testing.T) {
	t.Helper()
	calls := b.calls(t)
	if want := "aws autoscaling set-instance-health --instance-id " + fakeInstanceID + " --health-status Unhealthy --no-should-respect-grace-period"; !slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, want+" ") }) {
		t.Errorf("the instance is not marked unhealthy as %q:\n%s", want, strings.Join(calls, "\n"))
	}
	if got := b.imds.log(); !slices.Equal(got, []string{"PUT /latest/api/token ttl=300", "GET /latest/meta-data/instance-id token ok"}) {
		t.Errorf("metadata service calls %q, want a token then the instance id with it", got)
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "systemctl") || strings.HasPrefix(c, "shutdown") {
			t.Errorf("a failed boot called %s", c)
		}
	}
}

const fakeInstanceID = "i-0b00700000000feed"

// fakeIMDS is the instance metadata service as IMDSv2 answers: a PUT of
// /latest/api/token with a TTL header issues a token, and a GET of
// metadata needs it (401 without).
type fakeIMDS struct {
	url   string
	mu    sync.Mutex
	calls []string
}

func newFakeIMDS(t *testing.T) *fakeIMDS {
	f := &fakeIMDS{}
	const token = "AQAEAFakeSessionToken=="
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
			if err != nil || ttl < 1 || ttl > 21600 {
				f.calls = append(f.calls, "PUT /latest/api/token bad ttl")
				http.Error(w, "", http.StatusBadRequest)
				return
			}
			f.calls = append(f.calls, fmt.Sprintf("PUT /latest/api/token ttl=%d", ttl))
			fmt.Fprint(w, token)
		case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data/instance-id":
			if r.Header.Get("X-aws-ec2-metadata-token") != token {
				f.calls = append(f.calls, "GET /latest/meta-data/instance-id without the token")
				http.Error(w, "", http.StatusUnauthorized)
				return
			}
			f.calls = append(f.calls, "GET /latest/meta-data/instance-id token ok")
			fmt.Fprint(w, fakeInstanceID)
		default:
			f.calls = append(f.calls, r.Method+" "+r.URL.Path+" unknown")
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeIMDS) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// unitSettings reads a unit file: its Environment= values (unquoted) and
// its other lines.
func unitSettings(unit string) (map[string]string, []string) {
	env := map[string]string{}
	var lines []string
	for _, l := range strings.Split(unit, "\n") {
		v, ok := strings.CutPrefix(l, "Environment=")
		if !ok {
			lines = append(lines, l)
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	return env, lines
}

// outputValue is a template output's value, resolved.
func outputValue(t *testing.T, s synthesized, name string) string {
	t.Helper()
	out, ok := s.json["Outputs"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("no output %s", name)
	}
	return resolveTemplateValue(t, s, out["Value"])
}

// resolveUserData is what an instance of the launch template receives as
// user data: the template's Fn::Base64 of an Fn::Sub, resolved and
// decoded.
func resolveUserData(t *testing.T, s synthesized, ud any) string {
	t.Helper()
	m, ok := ud.(map[string]any)
	if !ok || len(m) != 1 || m["Fn::Base64"] == nil {
		t.Fatalf("user data is not an Fn::Base64: %v", jsonText(t, ud))
	}
	enc := base64.StdEncoding.EncodeToString([]byte(resolveTemplateValue(t, s, m["Fn::Base64"])))
	dec, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	return string(dec)
}

// fakeAccount is the account the template's pseudo parameters resolve in.
const fakeAccount = "123456789012"

// resolveTemplateValue resolves a template value as CloudFormation would in
// an account: pseudo parameters; Ref of a resource to "ref:<logical id>"
// and Fn::GetAtt to "att:<logical id>.<attribute>" (the resource must
// exist); Fn::Join, Fn::Select, Fn::Split and Fn::Sub. Fn::Sub's
// "${!x}" is the literal "${x}". Anything else fails the test: a boot
// script must not depend on what the test cannot see.
func resolveTemplateValue(t *testing.T, s synthesized, v any) string {
	t.Helper()
	resources := s.json["Resources"].(map[string]any)
	ref := func(name string) string {
		switch name {
		case "AWS::AccountId":
			return fakeAccount
		case "AWS::Region":
			return s.cfg.Region
		case "AWS::Partition":
			return "aws"
		case "AWS::URLSuffix":
			return "amazonaws.com"
		case "AWS::StackName":
			return "fleetq-" + s.cfg.Stage
		}
		if _, ok := resources[name]; !ok {
			t.Fatalf("Ref of %q: no such resource or pseudo parameter", name)
		}
		return "ref:" + name
	}
	getAtt := func(id, attr string) string {
		if _, ok := resources[id]; !ok {
			t.Fatalf("Fn::GetAtt of %q: no such resource", id)
		}
		return "att:" + id + "." + attr
	}
	list := func(v any) []any {
		l, ok := v.([]any)
		if !ok {
			t.Fatalf("%s is not a list", jsonText(t, v))
		}
		return l
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case map[string]any:
		if len(x) != 1 {
			break
		}
		for fn, arg := range x {
			switch fn {
			case "Ref":
				return ref(arg.(string))
			case "Fn::GetAtt":
				a := list(arg)
				return getAtt(a[0].(string), a[1].(string))
			case "Fn::Join":
				a := list(arg)
				var parts []string
				for _, p := range list(a[1]) {
					parts = append(parts, resolveTemplateValue(t, s, p))
				}
				return strings.Join(parts, a[0].(string))
			case "Fn::Select":
				a := list(arg)
				i, err := strconv.Atoi(resolveTemplateValue(t, s, a[0]))
				items := list(a[1])
				if err != nil || i < 0 || i >= len(items) {
					t.Fatalf("Fn::Select %v", jsonText(t, arg))
				}
				return resolveTemplateValue(t, s, items[i])
			case "Fn::Sub":
				text, vars := "", map[string]any{}
				switch a := arg.(type) {
				case string:
					text = a
				case []any:
					text = a[0].(string)
					vars = a[1].(map[string]any)
				}
				return regexp.MustCompile(`\$\{([^}]*)\}`).ReplaceAllStringFunc(text, func(m string) string {
					name := m[2 : len(m)-1]
					if lit, ok := strings.CutPrefix(name, "!"); ok {
						return "${" + lit + "}"
					}
					if val, ok := vars[name]; ok {
						return resolveTemplateValue(t, s, val)
					}
					if id, attr, ok := strings.Cut(name, "."); ok {
						return getAtt(id, attr)
					}
					return ref(name)
				})
			}
		}
	}
	t.Fatalf("cannot resolve %s", jsonText(t, v))
	return ""
}
