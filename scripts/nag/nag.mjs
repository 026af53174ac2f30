// Runs cdk-nag's AwsSolutions and Serverless rule packs over synthesized
// CloudFormation templates and prints every finding that is not suppressed
// (by a cdk_nag metadata entry on its resource) as one JSON array:
//
//   node scripts/nag/nag.mjs template.json [more.json ...]
//
// infra/nag_test.go runs it; the exit code is 0 whenever the templates
// could be read, so the test reports the findings itself.
import { readFileSync } from 'node:fs';
import { App, Aspects, LegacyStackSynthesizer, Stack } from 'aws-cdk-lib';
import { CfnInclude } from 'aws-cdk-lib/cloudformation-include';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';

const findings = [];
// collect is a cdk-nag logger: it keeps what the packs report.
const collect = (template) => ({
  onCompliance() {},
  onNotApplicable() {},
  onSuppressed() {},
  onSuppressedError() {},
  onNonCompliance(d) {
    findings.push({ template, pack: d.nagPackName, rule: d.ruleId, level: d.ruleLevel,
      resource: d.resource.node.path, finding: d.findingId, info: d.ruleInfo });
  },
  onError(d) {
    findings.push({ template, pack: d.nagPackName, rule: d.ruleId, level: 'Error',
      resource: d.resource.node.path, finding: 'rule failed to run', info: String(d.errorMessage) });
  },
});

for (const file of process.argv.slice(2)) {
  const app = new App();
  // The included template brings its own BootstrapVersion parameter.
  const stack = new Stack(app, 'Checked', { synthesizer: new LegacyStackSynthesizer() });
  new CfnInclude(stack, 'Template', { templateFile: file });
  const opts = { reports: false, verbose: true, additionalLoggers: [collect(file)] };
  Aspects.of(app).add(new AwsSolutionsChecks(opts));
  Aspects.of(app).add(new ServerlessChecks(opts));
  app.synth();
}
process.stdout.write(JSON.stringify(findings, null, 1) + '\n');
