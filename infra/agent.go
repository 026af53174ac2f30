package infra

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// AgentBinary is the agent's file name under <AgentDir>/<arch>/, as `make
// build` writes it.
const AgentBinary = "fleetq"

// familyPattern splits an instance type's family into its class letters,
// generation and attribute letters: g5g.xlarge → g, 5, g.
var familyPattern = regexp.MustCompile(`^([a-z]+)(\d+)([a-z-]*)\.`)

// Arch is the Go architecture (amd64 or arm64) of an EC2 instance type.
// Graviton families carry a "g" among the attribute letters after the
// generation (c7g, m7gd, g5g, t4g); every other family is x86_64. The Mac
// families are refused: fleets run Linux.
func Arch(instanceType string) (string, error) {
	m := familyPattern.FindStringSubmatch(instanceType)
	if m == nil {
		return "", fmt.Errorf("%q is not an EC2 instance type", instanceType)
	}
	if m[1] == "mac" {
		return "", fmt.Errorf("%s is a Mac instance type; fleets run Linux", instanceType)
	}
	if strings.Contains(m[3], "g") {
		return "arm64", nil
	}
	return "amd64", nil
}

// FleetArch is the one architecture of a fleet's instance types. A fleet
// mixing architectures, or whose AMI parameter names the other
// architecture (the public AMI parameters carry x86_64 or arm64 in their
// path), cannot boot its agent on every instance and is refused.
func FleetArch(f fleetconfig.Fleet) (string, error) {
	arch := ""
	for _, t := range f.InstanceTypes {
		a, err := Arch(t)
		if err != nil {
			return "", fmt.Errorf("fleet %s: %w", f.Slug, err)
		}
		if arch != "" && a != arch {
			return "", fmt.Errorf("fleet %s mixes %s and %s instance types (%v): one AMI and one agent binary cannot serve both; split the fleet", f.Slug, arch, a, f.InstanceTypes)
		}
		arch = a
	}
	p := strings.ToLower(f.AMISSMParameter)
	for name, a := range map[string]string{"x86_64": "amd64", "amd64": "amd64", "arm64": "arm64", "aarch64": "arm64"} {
		if strings.Contains(p, name) && a != arch {
			return "", fmt.Errorf("fleet %s: ami_ssm_parameter %s is an %s image but its instance types %v are %s", f.Slug, f.AMISSMParameter, name, f.InstanceTypes, arch)
		}
	}
	return arch, nil
}

// agentArches are the architectures the stage's fleets need, sorted.
func agentArches(cfg *fleetconfig.Config) ([]string, error) {
	var out []string
	for _, f := range cfg.Fleets {
		a, err := FleetArch(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}

// AgentAsset is the agent binary of one architecture, published with the
// stack as an S3 asset.
type AgentAsset struct {
	Arch string
	// SHA256 is the binary's digest computed at synthesis, hex; the user data
	// refuses to run a download that does not match it.
	SHA256 string
	Asset  awss3assets.Asset
	// Placeholder says the binary was not built and a stand-in was
	// published (only with Options.AllowPlaceholders).
	Placeholder bool
}

// agentPath is where `make build` puts the agent of arch.
func agentPath(dir, arch string) string { return filepath.Join(dir, arch, AgentBinary) }

// agentAsset publishes <AgentDir>/<arch>/fleetq, or a stand-in that exits
// with an explanation when placeholders are allowed and none was built.
func (b *build) agentAsset(arch string) (*AgentAsset, error) {
	path := agentPath(b.o.AgentDir, arch)
	data, err := os.ReadFile(path)
	placeholder := false
	if err != nil {
		if !b.o.AllowPlaceholders {
			return nil, fmt.Errorf("infra: no agent binary %s: run `make build` first", path)
		}
		placeholder = true
		data = []byte("#!/bin/sh\necho 'fleetq agent " + arch + ": deployed without its binary; run make build, then deploy again' >&2\nexit 1\n")
		dir := filepath.Join(os.TempDir(), "fleetq-cdk-assets", b.stage, "agent-"+arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		path = filepath.Join(dir, AgentBinary)
		if err := os.WriteFile(path, data, 0o755); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(data)
	asset := awss3assets.NewAsset(b.st, jsii.String("Agent"+strings.ToUpper(arch[:1])+arch[1:]), &awss3assets.AssetProps{Path: jsii.String(path)})
	return &AgentAsset{Arch: arch, SHA256: hex.EncodeToString(sum[:]), Asset: asset, Placeholder: placeholder}, nil
}
