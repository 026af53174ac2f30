package fleetconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fleetq/fleetq/config"
)

// Problem is one thing wrong with a config file: where, and what.
type Problem struct {
	// Line is the problem's line in the file, 0 when the file lacks what
	// the problem is about (a required field).
	Line    int
	Field   string
	Message string
}

// ValidationError lists every problem found in one file.
type ValidationError struct {
	Source   string
	Problems []Problem
}

// Error implements error.
func (e *ValidationError) Error() string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		at := e.Source
		if p.Line > 0 {
			at += ":" + strconv.Itoa(p.Line)
		}
		lines = append(lines, fmt.Sprintf("%s: %s: %s", at, p.Field, p.Message))
	}
	return strings.Join(lines, "\n")
}

// Load reads, defaults and validates the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fleet config: %w", err)
	}
	return Parse(path, data)
}

// Default returns the built-in example config (stage dev), the one `fleetq dev`
// uses when given no file.
func Default() *Config {
	cfg, err := Parse("built-in config/dev.yaml", config.Dev)
	if err != nil {
		panic(fmt.Sprintf("built-in fleet config is invalid: %v", err))
	}
	return cfg
}

// ForStage returns the built-in config of a stage shipped in config/.
func ForStage(stage string) (*Config, error) {
	data, ok := config.Stage(stage)
	if !ok {
		return nil, fmt.Errorf("no built-in fleet config for stage %q (have %s)", stage, strings.Join(config.Stages(), ", "))
	}
	return Parse("config/"+stage+".yaml", data)
}

// Parse decodes a config document strictly (unknown fields are errors), fills
// in defaults and validates it. source names the document in error messages.
func Parse(source string, data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ValidationError{Source: source, Problems: []Problem{{Field: "(file)", Message: "is empty"}}}
		}
		return nil, &ValidationError{Source: source, Problems: []Problem{syntaxProblem(err)}}
	}
	k := &checker{}
	if len(root.Content) > 0 {
		checkNode(k, root.Content[0], reflect.TypeFor[Config](), "")
	}
	if len(k.problems) > 0 {
		return nil, &ValidationError{Source: source, Problems: k.problems}
	}
	var cfg Config
	// Strict decoding stays as a safety net behind checkNode, whose
	// messages are the ones a person reads.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, &ValidationError{Source: source, Problems: []Problem{{Field: "(file)", Message: "cannot be read: " + goTypeNames.ReplaceAllString(cleanYAMLError(err), "")}}}
	}
	cfg.source = source
	cfg.applyDefaults()
	if problems := cfg.validate(); len(problems) > 0 {
		for i := range problems {
			problems[i].Line = lineOf(&root, problems[i].Field)
		}
		return nil, &ValidationError{Source: source, Problems: problems}
	}
	return &cfg, nil
}

// goTypeNames are the decoder's mentions of Go types, which mean nothing
// to whoever edits the file.
var goTypeNames = regexp.MustCompile(` (in|into) (type )?[\w.\[\]*]+`)

// syntaxProblem is a YAML syntax error as a problem at its line: the
// parser says "yaml: line 3: mapping values are not allowed in this
// context".
func syntaxProblem(err error) Problem {
	msg := cleanYAMLError(err)
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Line: line, Field: "(yaml)", Message: msg[len(m[0]):]}
	}
	return Problem{Field: "(yaml)", Message: msg}
}

var syntaxLine = regexp.MustCompile(`^line (\d+): `)

func cleanYAMLError(err error) string {
	return strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\n", "; "), "yaml: ")
}

func (c *Config) applyDefaults() {
	if c.JobRetention == 0 {
		c.JobRetention = Duration(DefaultJobRetention)
	}
	if c.RegistrationLimit == 0 {
		c.RegistrationLimit = DefaultRegistrationLimit
	}
	if c.WaitConcurrency == 0 {
		c.WaitConcurrency = DefaultWaitConcurrency
	}
	if c.Network.VPCID == "" && c.Network.VPCCIDR == "" {
		c.Network.VPCCIDR = "10.80.0.0/16"
	}
	if c.Network.MaxAZs == 0 {
		c.Network.MaxAZs = 2
	}
	c.Webhooks.applyDefaults()
	for i := range c.Fleets {
		c.Fleets[i].applyDefaults()
	}
}

func (f *Fleet) applyDefaults() {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDur := func(v *Duration, d time.Duration) {
		if *v == 0 {
			*v = Duration(d)
		}
	}
	setInt(&f.SlotsPerInstance, DefaultSlotsPerInstance)
	setInt(&f.MaxInstances, DefaultMaxInstances)
	setDur(&f.IdleWindow, DefaultIdleWindow)
	setDur(&f.ScaleInGrace, DefaultScaleInGrace)
	setDur(&f.BootTimeout, DefaultBootTimeout)
	setInt(&f.WorkerCap, DefaultWorkerCap)
	setInt(&f.LeaseSeconds, DefaultLeaseSeconds)
	setInt(&f.HeartbeatSeconds, DefaultHeartbeatSeconds)
	setInt(&f.PollSeconds, DefaultPollSeconds)
	setInt(&f.ReadyShards, DefaultReadyShards)
	setDur(&f.JobTimeout, DefaultJobTimeout)
	setDur(&f.QueueSLO, DefaultQueueSLO)
	setInt(&f.Retry.MaxAttempts, DefaultMaxAttempts)
	if len(f.Retry.Backoff) == 0 {
		for _, b := range DefaultBackoff {
			f.Retry.Backoff = append(f.Retry.Backoff, Duration(b))
		}
	}
	setInt(&f.PreemptionCap, DefaultPreemptionCap)
	setInt(&f.RootVolumeGB, DefaultRootVolumeGB)
	f.Spot.applyDefaults()
	f.SpotPool.applyDefaults()
	if f.Agent.Runner == "" {
		f.Agent.Runner = DefaultRunner
	}
	if f.Agent.ComfyUIURL == "" {
		f.Agent.ComfyUIURL = DefaultComfyUIURL
	}
	f.Agent.Warmup.applyDefaults()
}

var (
	namePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)
	workflowPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	instancePattern = regexp.MustCompile(`^[a-z0-9-]+\.[a-z0-9]+$`)
	amiPattern      = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	regionPattern   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	sha256Pattern   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	emailPattern    = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
)

// Limits on values, shared with the HTTP API's validation.
const (
	MaxAttemptsLimit   = 20
	PreemptionCapLimit = 100
	MaxSlots           = 64
)

type checker struct{ problems []Problem }

func (k *checker) addAt(line int, field, format string, args ...any) {
	k.problems = append(k.problems, Problem{Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (k *checker) add(field, format string, args ...any) {
	k.problems = append(k.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (k *checker) rangeInt(field string, v, lo, hi int) {
	if v < lo || v > hi {
		k.add(field, "must be between %d and %d, got %d", lo, hi, v)
	}
}

func (c *Config) validate() []Problem {
	k := &checker{}
	if c.Stage == "" {
		k.add("stage", "is required")
	} else if !namePattern.MatchString(c.Stage) {
		k.add("stage", "%q must be lowercase letters, digits and dashes (at most 31)", c.Stage)
	}
	if c.Region != "" && !regionPattern.MatchString(c.Region) {
		k.add("region", "%q is not an AWS region name", c.Region)
	}
	if c.JobRetention.Std() < time.Hour {
		k.add("job_retention", "must be at least 1h, got %s", c.JobRetention)
	}
	k.rangeInt("registration_limit", c.RegistrationLimit, 1, 10000)
	k.rangeInt("wait_concurrency", c.WaitConcurrency, 1, 10000)
	c.Network.validate(k)
	for i, z := range c.Network.AvailabilityZones {
		if c.Region != "" && (!strings.HasPrefix(z, c.Region) || len(z) == len(c.Region)) {
			k.add(fmt.Sprintf("network.availability_zones[%d]", i), "%q is not a zone of region %s", z, c.Region)
		}
	}
	if c.AgentSHA256 != "" {
		if c.AgentURL == "" {
			k.add("agent_sha256", "is only used with agent_url (the stack's own agent asset carries its digest)")
		}
		if !sha256Pattern.MatchString(c.AgentSHA256) {
			k.add("agent_sha256", "must be 64 lowercase hex digits (sha256sum's output)")
		}
	}
	if c.AgentURL != "" && !strings.HasPrefix(c.AgentURL, "https://") && !strings.HasPrefix(c.AgentURL, "s3://") {
		k.add("agent_url", "%q must be an https:// or s3:// URL", c.AgentURL)
	}
	for i, e := range c.Alarms.Emails {
		if !emailPattern.MatchString(e) {
			k.add(fmt.Sprintf("alarms.emails[%d]", i), "%q is not an email address", e)
		}
	}
	c.validateTenants(k)
	c.validatePrices(k)
	c.Webhooks.validate(k)
	if len(c.Fleets) == 0 {
		k.add("fleets", "at least one fleet is required")
	}
	c.validateTags(k)
	slugs := map[string]int{}
	owner := map[string]string{}
	for i := range c.Fleets {
		f := &c.Fleets[i]
		at := fmt.Sprintf("fleets[%d]", i)
		if prev, dup := slugs[f.Slug]; dup && f.Slug != "" {
			k.add(at+".slug", "%q is already used by fleets[%d]", f.Slug, prev)
		}
		slugs[f.Slug] = i
		for j, w := range f.Workflows {
			if other, dup := owner[w]; dup {
				k.add(fmt.Sprintf("%s.workflows[%d]", at, j), "workflow %q is already served by fleet %q (a workflow belongs to one fleet)", w, other)
			}
			owner[w] = f.Slug
		}
		f.validate(at, k)
		c.validateSpotPoolZones(at, f, k)
	}
	return k.problems
}

func (n *Network) validate(k *checker) {
	if n.VPCID != "" && n.VPCCIDR != "" {
		k.add("network", "set either vpc_cidr (a new VPC) or vpc_id with subnet_ids (an existing one), not both")
	}
	if n.VPCCIDR != "" {
		if _, _, err := net.ParseCIDR(n.VPCCIDR); err != nil {
			k.add("network.vpc_cidr", "%q is not a CIDR block", n.VPCCIDR)
		}
		// Without availability_zones the zones come from Fn::GetAZs, whose
		// length is unknown at synthesis: only the first two are certain.
		if len(n.AvailabilityZones) == 0 {
			k.rangeInt("network.max_azs", n.MaxAZs, 1, 2)
		}
	}
	if n.VPCID != "" {
		if len(n.SubnetIDs) < 2 {
			k.add("network.subnet_ids", "an existing VPC needs at least 2 subnets in different availability zones")
		}
		if len(n.AvailabilityZones) != len(n.SubnetIDs) {
			k.add("network.availability_zones", "must list one zone per subnet (%d subnets, %d zones)", len(n.SubnetIDs), len(n.AvailabilityZones))
		}
	}
}

func (f *Fleet) validate(at string, k *checker) {
	if f.Slug == "" {
		k.add(at+".slug", "is required")
	} else if !namePattern.MatchString(f.Slug) {
		k.add(at+".slug", "%q must be lowercase letters, digits and dashes (at most 31)", f.Slug)
	}
	seen := map[string]bool{}
	for j, w := range f.Workflows {
		field := fmt.Sprintf("%s.workflows[%d]", at, j)
		if !workflowPattern.MatchString(w) {
			k.add(field, "%q must be 1-128 letters, digits, '.', '_', ':' or '-'", w)
		}
		if seen[w] {
			k.add(field, "workflow %q is listed twice", w)
		}
		seen[w] = true
	}
	k.rangeInt(at+".slots_per_instance", f.SlotsPerInstance, 1, MaxSlots)
	k.rangeInt(at+".min_instances", f.MinInstances, 0, 1000)
	k.rangeInt(at+".max_instances", f.MaxInstances, 1, 1000)
	if f.MaxInstances < f.MinInstances {
		k.add(at+".max_instances", "must be at least min_instances (%d), got %d", f.MinInstances, f.MaxInstances)
	}
	if f.IdleWindow.Std() < time.Minute {
		k.add(at+".idle_window", "must be at least 1m, got %s", f.IdleWindow)
	}
	if f.ScaleInGrace.Std() < 0 {
		k.add(at+".scale_in_grace", "must not be negative")
	}
	if f.BootTimeout.Std() < time.Minute {
		k.add(at+".boot_timeout", "must be at least 1m, got %s", f.BootTimeout)
	}
	k.rangeInt(at+".worker_cap", f.WorkerCap, 1, 10000)
	if f.WorkerCap < f.MaxInstances {
		k.add(at+".worker_cap", "must be at least max_instances (%d), got %d", f.MaxInstances, f.WorkerCap)
	}
	k.rangeInt(at+".lease_seconds", f.LeaseSeconds, 10, 3600)
	k.rangeInt(at+".heartbeat_seconds", f.HeartbeatSeconds, 1, 1200)
	if f.HeartbeatSeconds*2 > f.LeaseSeconds {
		k.add(at+".heartbeat_seconds", "must be at most half of lease_seconds (%d) so one lost heartbeat does not lose the lease, got %d", f.LeaseSeconds, f.HeartbeatSeconds)
	}
	k.rangeInt(at+".poll_seconds", f.PollSeconds, 1, 300)
	k.rangeInt(at+".ready_shards", f.ReadyShards, 1, MaxReadyShards)
	if f.JobTimeout.Std() < time.Second || f.JobTimeout.Std() > 7*24*time.Hour {
		k.add(at+".job_timeout", "must be between 1s and 168h, got %s", f.JobTimeout)
	}
	if f.QueueTimeout.Std() < 0 {
		k.add(at+".queue_timeout", "must not be negative")
	}
	if f.QueueSLO.Std() < time.Minute || f.QueueSLO.Std() > 24*time.Hour {
		k.add(at+".queue_slo", "must be between 1m and 24h, got %s", f.QueueSLO)
	}
	k.rangeInt(at+".retry.max_attempts", f.Retry.MaxAttempts, 1, MaxAttemptsLimit)
	for j, b := range f.Retry.Backoff {
		if b.Std() < 0 || b.Std() > 24*time.Hour {
			k.add(fmt.Sprintf("%s.retry.backoff[%d]", at, j), "must be between 0s and 24h, got %s", b)
		}
	}
	k.rangeInt(at+".preemption_cap", f.PreemptionCap, 1, PreemptionCapLimit)
	if len(f.InstanceTypes) == 0 {
		k.add(at+".instance_types", "at least one instance type is required")
	}
	for j, t := range f.InstanceTypes {
		if !instancePattern.MatchString(t) {
			k.add(fmt.Sprintf("%s.instance_types[%d]", at, j), "%q is not an EC2 instance type (e.g. g5.xlarge)", t)
		}
	}
	if f.AMIID != "" && f.AMISSMParameter != "" {
		k.add(at+".ami_id", "set either ami_id or ami_ssm_parameter, not both")
	}
	if f.AMIID != "" && !amiPattern.MatchString(f.AMIID) {
		k.add(at+".ami_id", "%q is not an AMI id (ami-0123456789abcdef0)", f.AMIID)
	}
	if f.AMISSMParameter != "" && !strings.HasPrefix(f.AMISSMParameter, "/") {
		k.add(at+".ami_ssm_parameter", "%q must be an SSM parameter path starting with /", f.AMISSMParameter)
	}
	k.rangeInt(at+".root_volume_gb", f.RootVolumeGB, 8, 16384)
	switch f.Agent.Runner {
	case "exec":
		if f.Agent.Exec == "" {
			k.add(at+".agent.exec", "is required when agent.runner is exec")
		}
	case "comfyui", "sleep":
	default:
		k.add(at+".agent.runner", "%q must be exec, comfyui or sleep", f.Agent.Runner)
	}
	if f.Agent.DrainTimeout.Std() < 0 || f.Agent.DrainTimeout.Std() > 2*time.Hour {
		k.add(at+".agent.drain_timeout", "must be between 0s and 2h, got %s", f.Agent.DrainTimeout)
	}
	f.validateWarmup(at, k)
	f.validateWarm(at, k)
	f.validateForecast(at, k)
	f.validateOnDemand(at, k)
	f.validateBridge(at, k)
	f.validateSpot(at, k)
	f.validateSpotPool(at, k)
}
