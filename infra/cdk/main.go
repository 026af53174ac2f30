// Command cdk is the CDK app of cdk.json: it synthesizes the stack of one
// stage (context or flag "stage", default dev) from that stage's fleet
// config, config/<stage>.yaml — the same file the functions are built with.
//
//	make synth STAGE=prod           # offline, into cdk.out/
//	npx aws-cdk deploy -c stage=prod
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
	st, err := infra.New(app, infra.Options{Config: cfg, ConfigYAML: raw})
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	if len(st.Placeholders) > 0 {
		fmt.Fprintf(os.Stderr, "synth: no binaries for %v in bin/: placeholders used; run `make build` before deploying\n", st.Placeholders)
	}
	app.Synth(nil)
}
