// Package config holds the fleet configuration of each stage as YAML files
// (dev.yaml, prod.yaml) and embeds them, so the binaries and the CDK app carry
// the reviewed configuration with them. pkg/domain/fleetconfig parses and validates it.
package config

import (
	"embed"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Dev is the built-in example configuration that `fleetq dev` uses when given none.
var Dev = mustRead("dev.yaml")

// Stage returns the YAML of a stage's built-in config file.
func Stage(stage string) ([]byte, bool) {
	data, err := files.ReadFile(stage + ".yaml")
	return data, err == nil
}

// Stages lists the stages that have a built-in config file.
func Stages() []string {
	entries, _ := files.ReadDir(".")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

func mustRead(name string) []byte {
	data, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return data
}
