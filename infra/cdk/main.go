// Command cdk is the CDK app of cdk.json: it synthesizes the stack of one
// stage (context or flag "stage", default dev) from that stage's fleet
// config, config/<stage>.yaml — the same file the functions are built with.
//
//	make synth STAGE=prod           # offline, into cdk.out/
//	npx aws-cdk deploy -c stage=prod
//
// Synthesis refuses to run before `make build` (the functions' and the
// agent's binaries are part of the stack) unless -c allowPlaceholders=true,
// and refuses a CLI region (CDK_DEFAULT_REGION) other than the config's.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/infra"
)

func main() {
	stage := flag.String("stage", "", "stage to synthesize (default: the cdk context's stage, else dev)")
	out := flag.String("out", "", "cloud assembly directory (default: what the cdk CLI asks, else cdk.out)")
	file := flag.String("config", "", "fleet config file (default: context \"config\", else the built-in config/<stage>.yaml)")
	flag.Parse()
	props := &awscdk.AppProps{}
	if *out != "" {
		props.Outdir = jsii.String(*out)
	}
	app := awscdk.NewApp(props)
	if *stage == "" {
		if v, ok := app.Node().TryGetContext(jsii.String("stage")).(string); ok {
			*stage = v
		}
	}
	if *stage == "" {
		*stage = "dev"
	}
	if *file == "" {
		if v, ok := app.Node().TryGetContext(jsii.String("config")).(string); ok {
			*file = v
		}
	}
	cfg, raw, err := infra.LoadConfig(*stage, *file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	if err := infra.CheckRegion(cfg, os.Getenv("CDK_DEFAULT_REGION")); err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	allow := false
	switch v := app.Node().TryGetContext(jsii.String("allowPlaceholders")).(type) {
	case bool:
		allow = v
	case string:
		allow = v == "true"
	}
	st, err := infra.New(app, infra.Options{Config: cfg, ConfigYAML: raw, AllowPlaceholders: allow})
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	if len(st.Placeholders) > 0 {
		fmt.Fprintf(os.Stderr, "synth: PLACEHOLDERS for %v (allowPlaceholders): this stack cannot run a job; run `make build` before deploying\n", st.Placeholders)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		if a, ok := st.Agents[arch]; ok {
			fmt.Fprintf(os.Stderr, "synth: agent linux/%s: asset %s, sha256 %s\n", arch, *a.Asset.AssetHash(), a.SHA256)
		}
	}
	if cfg.AgentURL != "" {
		fmt.Fprintf(os.Stderr, "synth: agent from agent_url %s (sha256 %s)\n", cfg.AgentURL, cfg.AgentSHA256)
	}
	app.Synth(nil)
}
