package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/lib/logging"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

func init() {
	register("worker", "run the worker agent on a GPU machine: register, lease, run, report", runWorker)
}

// env reads FLEETQ_<NAME> for a flag's default.
func env(name, def string) string {
	if v := os.Getenv("FLEETQ_" + name); v != "" {
		return v
	}
	return def
}

// workerFlags are fleetq worker's settings.
type workerFlags struct {
	api, secret, secretFile, secretSSM *string
	stsEndpoint                        *string
	fleet, stage, workerID             *string
	concurrency                        *int
	runner, execCmd, execHealth, comfy *string
	execPassEnv                        *string
	comfyExtraFile                     *string
	imdsEndpoint                       *string
	noIMDS, noGPUCheck                 *bool
	drain, healthEvery, unhealthyAfter *time.Duration
	slot, stateDir                     *string
	logLevel                           *string
	xidSource, xidFatal                *string
	warmupWorkflow, warmupInput        *string
	warmupExec                         *string
	warmupTimeout                      *time.Duration
}

// parseWorkerFlags reads the flags, each defaulting to its FLEETQ_*
// variable.
func parseWorkerFlags(args []string, stderr io.Writer) (*workerFlags, error) {
	fs := flag.NewFlagSet("fleetq worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &workerFlags{
		api:    fs.String("api", env("API", ""), "fleetq API URL (env FLEETQ_API)"),
		secret: fs.String("fleet-secret", env("FLEET_SECRET", ""), "the fleet's own secret, for workers outside AWS (env FLEETQ_FLEET_SECRET); prefer --fleet-secret-file. Without one the worker attests with the instance's AWS credentials"),
		stsEndpoint: fs.String("sts-endpoint", env("STS_ENDPOINT", ""),
			"STS endpoint an attested registration's identity request is signed for; the stage's API must forward to the same (env FLEETQ_STS_ENDPOINT; default the region's, https://sts.<region>.amazonaws.com/)"),
		secretFile:  fs.String("fleet-secret-file", env("FLEET_SECRET_FILE", ""), "file holding the fleet secret (env FLEETQ_FLEET_SECRET_FILE)"),
		secretSSM:   fs.String("fleet-secret-ssm", env("FLEET_SECRET_SSM", ""), "SSM SecureString parameter holding the fleet secret, read with the instance's role (env FLEETQ_FLEET_SECRET_SSM)"),
		fleet:       fs.String("fleet", env("FLEET", ""), "fleet slug (env FLEETQ_FLEET)"),
		stage:       fs.String("stage", env("STAGE", ""), "stage the fleet belongs to (env FLEETQ_STAGE)"),
		workerID:    fs.String("worker-id", env("WORKER_ID", ""), "worker id (env FLEETQ_WORKER_ID; default: the EC2 instance id from IMDS, else the hostname)"),
		runner:      fs.String("runner", env("RUNNER", "exec"), "exec, comfyui or sleep (env FLEETQ_RUNNER)"),
		execCmd:     fs.String("exec", env("EXEC", ""), "shell command the exec runner runs per job (env FLEETQ_EXEC)"),
		execHealth:  fs.String("exec-health", env("EXEC_HEALTH", ""), "shell command that exits 0 when the exec runner's engine is ready, run before every lease (env FLEETQ_EXEC_HEALTH)"),
		execPassEnv: fs.String("exec-pass-env", env("EXEC_PASS_ENV", ""), "comma-separated names of the agent's environment variables the exec runner's command also gets; it gets no others beyond PATH, the locale and the GPU variables (env FLEETQ_EXEC_PASS_ENV)"),
		comfy:       fs.String("comfyui-url", env("COMFYUI_URL", "http://127.0.0.1:8188"), "ComfyUI server of the comfyui runner; several, comma-separated, for one ComfyUI per GPU (env FLEETQ_COMFYUI_URL)"),
		comfyExtraFile: fs.String("comfyui-extra-data-file", env("COMFYUI_EXTRA_DATA_FILE", ""),
			"JSON object sent as every prompt's extra_data, e.g. {\"api_key_comfy_org\": \"...\"} for API nodes (env FLEETQ_COMFYUI_EXTRA_DATA_FILE)"),
		noGPUCheck:   fs.Bool("no-gpu-check", env("NO_GPU_CHECK", "") == "true", "do not read nor watch the GPUs with nvidia-smi (env FLEETQ_NO_GPU_CHECK=true)"),
		imdsEndpoint: fs.String("imds-endpoint", env("IMDS_ENDPOINT", ""), "instance metadata endpoint (env FLEETQ_IMDS_ENDPOINT; default EC2's)"),
		noIMDS:       fs.Bool("no-imds", env("NO_IMDS", "") == "true", "do not use instance metadata (not on EC2: no Spot or rebalance watch) (env FLEETQ_NO_IMDS=true)"),
		logLevel:     fs.String("log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (env FLEETQ_LOG_LEVEL)"),
		stateDir:     fs.String("state-dir", env("STATE_DIR", defaultStateDir()), "where the agent keeps its key, so a restart is told apart from a second agent with the same worker id (env FLEETQ_STATE_DIR)"),
		slot:         fs.String("slot", env("SLOT", ""), "this agent's slot on a machine running several (one per GPU: 0, 1, ...); the default worker id gets it as a suffix (env FLEETQ_SLOT)"),
	}
	maxConc, _ := strconv.Atoi(env("MAX_CONCURRENCY", "1"))
	f.concurrency = fs.Int("max-concurrency", maxConc, "jobs run at once (env FLEETQ_MAX_CONCURRENCY)")
	drainDefault, _ := time.ParseDuration(env("DRAIN_TIMEOUT", "0s"))
	f.drain = fs.Duration("drain-timeout", drainDefault, "on SIGTERM/SIGINT, how long running jobs may finish before they are requeued (env FLEETQ_DRAIN_TIMEOUT)")
	healthDefault, _ := time.ParseDuration(env("HEALTH_EVERY", "30s"))
	f.healthEvery = fs.Duration("health-every", healthDefault, "how often the GPUs and the runner are checked while running (env FLEETQ_HEALTH_EVERY)")
	unhealthyDefault, _ := time.ParseDuration(env("UNHEALTHY_AFTER", "5m"))
	f.unhealthyAfter = fs.Duration("unhealthy-after", unhealthyDefault, "how long the runner may stay unready before the worker gives up its jobs and exits 3 (env FLEETQ_UNHEALTHY_AFTER)")
	f.xidSource = fs.String("xid-source", env("XID_SOURCE", "dmesg"),
		"where the kernel log is read for NVIDIA Xid errors: a shell command, file:PATH, or none (env FLEETQ_XID_SOURCE)")
	f.xidFatal = fs.String("xid-fatal", env("XID_FATAL", ""),
		"comma-separated Xid codes that make the GPU sick (env FLEETQ_XID_FATAL; default the list in docs/worker.md)")
	f.warmupWorkflow = fs.String("warmup-workflow", env("WARMUP_WORKFLOW", ""),
		"a workflow in ComfyUI's API format (a file) the comfyui runner runs once on every server after it is ready and before the worker registers, to load the models (env FLEETQ_WARMUP_WORKFLOW)")
	f.warmupInput = fs.String("warmup-input", env("WARMUP_INPUT", ""),
		"a job input (a JSON object) the runner runs once after it is ready and before the worker registers (env FLEETQ_WARMUP_INPUT)")
	f.warmupExec = fs.String("warmup-exec", env("WARMUP_EXEC", ""),
		"a shell command run once after the runner is ready and before the worker registers; exit 0 means warm (env FLEETQ_WARMUP_EXEC)")
	warmupDefault, _ := time.ParseDuration(env("WARMUP_TIMEOUT", agent.DefaultWarmupTimeout.String()))
	f.warmupTimeout = fs.Duration("warmup-timeout", warmupDefault,
		"how long the warm-up may take; a warm-up that fails or takes longer marks the machine unhealthy and the worker exits 3 (env FLEETQ_WARMUP_TIMEOUT)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetq worker [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs jobs of one fleet on this machine: waits for the runner, registers (attested by the EC2")
		fmt.Fprintln(stderr, "instance's own credentials, or with the fleet's secret outside AWS),")
		fmt.Fprintln(stderr, "leases up to --max-concurrency jobs, heartbeats them, and reports each outcome. A Spot")
		fmt.Fprintln(stderr, "interruption notice requeues running jobs (no attempt spent) and exits; SIGTERM drains.")
		fmt.Fprintln(stderr, "Every flag can be set with the FLEETQ_* variable named in its help. See docs/worker.md.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return f, nil
}

// newRunner is the runner --runner names.
func (f *workerFlags) newRunner() (agent.Runner, error) {
	switch *f.runner {
	case "exec":
		if *f.execCmd == "" {
			return nil, fmt.Errorf("the exec runner needs --exec")
		}
		var pass []string
		for _, name := range strings.Split(*f.execPassEnv, ",") {
			if name = strings.TrimSpace(name); name != "" {
				pass = append(pass, name)
			}
		}
		return agent.ExecRunner{Command: *f.execCmd, HealthCommand: *f.execHealth, PassEnv: pass}, nil
	case "comfyui":
		r := agent.ComfyUIRunner{}
		if *f.comfyExtraFile != "" {
			b, err := os.ReadFile(*f.comfyExtraFile)
			if err != nil {
				return nil, fmt.Errorf("--comfyui-extra-data-file: %w", err)
			}
			if err := json.Unmarshal(b, &r.ExtraData); err != nil || r.ExtraData == nil {
				return nil, fmt.Errorf("--comfyui-extra-data-file must hold a JSON object")
			}
		}
		var urls []string
		for _, u := range strings.Split(*f.comfy, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
		switch len(urls) {
		case 0:
			return nil, fmt.Errorf("--comfyui-url is empty")
		case 1:
			r.URL = urls[0]
			return r, nil
		}
		return agent.NewComfyUIPool(r, urls), nil
	case "sleep":
		return agent.SleepRunner{}, nil
	}
	return nil, fmt.Errorf("--runner must be exec, comfyui or sleep, not %q", *f.runner)
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseWorkerFlags(args, stderr)
	if err != nil {
		return 2
	}
	log, err := logging.New(stderr, *f.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq worker:", err)
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "fleetq worker: "+format+"\n", a...)
		return 2
	}
	if *f.api == "" || *f.fleet == "" || *f.stage == "" {
		return fail("--api, --fleet and --stage are required")
	}
	r, err := f.newRunner()
	if err != nil {
		return fail("%v", err)
	}
	fleetSecret, err := readSecret(ctx, *f.secret, *f.secretFile, *f.secretSSM)
	if err != nil {
		return fail("%v", err)
	}
	var attestation *agent.Attestation
	if fleetSecret == "" {
		if attestation, err = instanceAttestation(ctx, *f.stsEndpoint); err != nil {
			return fail("%v", err)
		}
	}
	cfg := agent.Config{
		API: *f.api, FleetSecret: fleetSecret, Attest: attestation, Fleet: *f.fleet, Stage: *f.stage, WorkerID: *f.workerID,
		MaxConcurrency: *f.concurrency, Runner: r, DrainTimeout: *f.drain, Clock: clock.Real{}, Logger: log,
		HealthEvery: *f.healthEvery, UnhealthyAfter: *f.unhealthyAfter,
		Warmup: agent.Warmup{Workflow: *f.warmupWorkflow, Input: json.RawMessage(*f.warmupInput), Exec: *f.warmupExec,
			Timeout: *f.warmupTimeout},
	}
	if !*f.noGPUCheck {
		cfg.GPU = &agent.NvidiaSMI{}
		if cfg.Xid, err = xidLog(*f.xidSource, *f.xidFatal); err != nil {
			return fail("%v", err)
		}
	}
	if pool, ok := r.(*agent.ComfyUIPool); ok && cfg.MaxConcurrency < len(pool.Runners) {
		// One job per ComfyUI server.
		cfg.MaxConcurrency = len(pool.Runners)
	}
	if err := identify(ctx, &cfg, f); err != nil {
		return fail("%v", err)
	}
	if cfg.AgentKey, err = agent.LoadAgentKey(*f.stateDir, cfg.WorkerID); err != nil {
		return fail("%v (set --state-dir to a writable directory)", err)
	}
	if cfg.InstanceID != "" {
		// Kept on the instance's volume across a stop into a warm pool.
		cfg.PoolMarker = filepath.Join(*f.stateDir, "warm-pool-"+cfg.InstanceID)
	}
	a, err := agent.New(cfg)
	if err != nil {
		return fail("%v", err)
	}
	if err := runDraining(ctx, a, log); err != nil {
		fmt.Fprintln(stderr, "fleetq worker:", err)
		if errors.Is(err, agent.ErrUnhealthy) {
			return 3 // the machine should be replaced
		}
		return 1
	}
	return 0
}

// defaultStateDir is systemd's StateDirectory when set, else the user's
// configuration directory.
func defaultStateDir() string {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return d
	}
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "fleetq")
	}
	return filepath.Join(os.TempDir(), "fleetq")
}

// identify fills in the instance the worker runs on (from IMDS unless
// --no-imds) and its worker id: --worker-id, else the instance id, else
// the hostname.
func identify(ctx context.Context, cfg *agent.Config, f *workerFlags) error {
	if !*f.noIMDS {
		md := agent.NewMetadata(*f.imdsEndpoint)
		idCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, err := md.Identity(idCtx)
		cancel()
		if err != nil {
			cfg.Logger.Warn("no instance metadata: not watching for Spot notices", "error", err.Error())
		} else {
			cfg.Metadata = md
			cfg.InstanceID, cfg.InstanceType, cfg.AZ = id.InstanceID, id.InstanceType, id.AZ
			cfg.PurchaseOption, cfg.LaunchedAt, cfg.ImageID = id.PurchaseOption, id.LaunchedAt, id.ImageID
		}
	}
	if cfg.WorkerID == "" {
		machine := cfg.InstanceID
		if machine == "" {
			host, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("no --worker-id and no hostname: %v", err)
			}
			machine = host
		}
		id, err := defaultWorkerID(machine, *f.slot)
		if err != nil {
			return err
		}
		cfg.WorkerID = id
		if cfg.InstanceID == "" {
			// Off EC2 the machine stands for the instance, so interruption
			// events (e.g. posted to the dev stack) name every agent on it.
			cfg.InstanceID = machine
		}
	}
	if cfg.InstanceID == "" {
		// Off EC2 the worker id stands for the instance, so interruption
		// events (e.g. posted to the dev stack) can name it.
		cfg.InstanceID = cfg.WorkerID
	}
	return nil
}

// defaultWorkerID is the worker id of an agent given none: the machine
// (instance id, else hostname), with "-<slot>" when several agents share it
// (one per GPU), so that each has its own registration. A slot is short:
// letters, digits, '-' and '_'.
func defaultWorkerID(machine, slot string) (string, error) {
	if slot == "" {
		return machine, nil
	}
	if len(slot) > 16 || strings.Trim(slot, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return "", fmt.Errorf("--slot %q: use up to 16 letters, digits, '-' or '_'", slot)
	}
	return machine + "-" + slot, nil
}

// runDraining runs the agent until it stops. SIGTERM and SIGINT drain; the
// run context ends only when the drain is over.
func runDraining(ctx context.Context, a *agent.Agent, log *slog.Logger) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-sigs:
			log.Info("signal: draining")
			a.Drain()
		case <-runCtx.Done():
		}
	}()
	return a.Run(runCtx)
}

// instanceAttestation is attested registration with the credentials the
// AWS SDK finds (on EC2: the instance profile's), signed for the region's
// STS endpoint unless endpoint names another.
func instanceAttestation(ctx context.Context, endpoint string) (*agent.Attestation, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("attested registration: AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("attested registration needs the AWS region (AWS_REGION); outside AWS give the fleet's secret (--fleet-secret-file)")
	}
	if endpoint == "" {
		endpoint = attest.RegionalEndpoint(cfg.Region)
	}
	return &agent.Attestation{Credentials: cfg.Credentials, STSEndpoint: endpoint, Region: cfg.Region}, nil
}

// readSecret takes the fleet's secret from at most one place; none means
// the worker attests instead.
func readSecret(ctx context.Context, value, file, param string) (string, error) {
	n := 0
	for _, s := range []string{value, file, param} {
		if s != "" {
			n++
		}
	}
	switch n {
	case 0:
		return "", nil
	case 1:
	default:
		return "", fmt.Errorf("give the fleet's secret once: --fleet-secret, --fleet-secret-file or --fleet-secret-ssm")
	}
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("fleet secret file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	case param != "":
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return "", fmt.Errorf("fleet secret from SSM: %w", err)
		}
		out, err := ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", fmt.Errorf("fleet secret from SSM parameter %s: %w", param, err)
		}
		return aws.ToString(out.Parameter.Value), nil
	}
	return value, nil
}

// xidLog reads --xid-source and --xid-fatal: a shell command whose output
// is the kernel log, "file:PATH", or "none" (no Xid checks).
func xidLog(source, fatal string) (*agent.XidLog, error) {
	var x agent.XidLog
	switch source = strings.TrimSpace(source); {
	case source == "" || source == "none":
		return nil, nil
	case strings.HasPrefix(source, "file:"):
		if x.Path = strings.TrimPrefix(source, "file:"); x.Path == "" {
			return nil, fmt.Errorf("--xid-source file: needs a path")
		}
	default:
		x.Command = source
	}
	for _, c := range strings.Split(fatal, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		n, err := strconv.Atoi(c)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--xid-fatal: %q is not an Xid code (a positive number)", c)
		}
		x.Fatal = append(x.Fatal, n)
	}
	return &x, nil
}
