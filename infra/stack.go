// Package infra is the CDK app (aws-cdk-go) that deploys one fleetq stage:
// the four functions, the HTTP API, the submission queue and its DLQ, the
// table, the event bus and rules, the assets bucket, the signing keys and
// the fleets' own secrets, the agent binaries, and one Spot Auto Scaling Group per fleet of the stage's
// fleet config, with alarms that notify an SNS topic and a dashboard.
// Synthesis needs no AWS account: nothing is looked up.
package infra

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/service/api"
	"github.com/fleetq/fleetq/pkg/service/interruption"
)

// Options configure a stage's stack.
type Options struct {
	Config *fleetconfig.Config
	// ConfigYAML is the config's text; each function is deployed with it as
	// fleet.yaml (FLEETQ_CONFIG_FILE), so the functions run the very config
	// the stack was built from.
	ConfigYAML []byte
	// BinDir holds <function>/bootstrap as `make build` writes them
	// (default bin).
	BinDir string
	// AgentDir holds <arch>/fleetq, the agent cross-built by `make build`
	// (default <BinDir>/agent).
	AgentDir string
	// AllowPlaceholders lets synthesis stand in for binaries that were not
	// built (tests, `-c allowPlaceholders=true`); without it a missing
	// function or agent binary stops synthesis, so a stack that cannot run
	// a job is never deployed.
	AllowPlaceholders bool
}

// Functions are the stage's Lambda functions (awsenv.Functions).
var Functions = func() []string {
	var out []string
	for _, f := range awsenv.Functions {
		out = append(out, string(f))
	}
	return out
}()

// Tags the fleets' groups carry; the scaler's and the interruption
// function's Auto Scaling permissions are scoped by TagStage.
const (
	TagStage = "fleetq:stage"
	TagFleet = "fleetq:fleet"
	// LifecycleHook is the terminate hook of every group.
	LifecycleHook = "fleetq-drain"
)

// Stack is a synthesized stage and what its tests look at.
type Stack struct {
	Stack awscdk.Stack
	// Placeholders are the functions (and agents, as agent-<arch>)
	// synthesized without a built binary.
	Placeholders []string
	// Agents are the agent binaries published with the stack, by
	// architecture; empty when the config's agent_url overrides them.
	Agents map[string]*AgentAsset
	// ConsoleKey signs operator console sessions (the API reads it), and
	// WebhookKey job callbacks (the scaler, which delivers them, reads it):
	// generated secrets of their own, rotated by put-secret-value.
	ConsoleKey awssecretsmanager.Secret
	WebhookKey awssecretsmanager.Secret
	// AlarmTopic is the SNS topic every alarm of the stage notifies, with
	// the groups' launch and terminate errors.
	AlarmTopic awssns.Topic
	// ScalingTopic receives every launch and termination of the groups
	// (no subscription: for integrations).
	ScalingTopic awssns.Topic
	// FailedEvents is the dead-letter queue of the asynchronous invocations
	// (the scaler's tick, the interruption events) and their rules.
	FailedEvents awssqs.Queue
	// logs is the bucket of the assets bucket's access logs and the VPC's
	// flow logs.
	logs awss3.Bucket
	// workerRoles are the roles of each fleet's instances, by slug, and
	// spotTemplates the ARNs of the Spot groups' launch templates: what
	// Auto Scaling checks the scaler may use when it updates a Spot group.
	workerRoles   map[string]awsiam.Role
	spotTemplates []*string
}

// GroupName is the Auto Scaling Group of a fleet.
func GroupName(stage, fleet string) string { return fmt.Sprintf("fleetq-%s-%s", stage, fleet) }

// New builds the stage's stack in app.
func New(app constructs.Construct, o Options) (*Stack, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	b := newBuild(app, o)
	if err := b.agents(); err != nil {
		return nil, err
	}
	table := b.table()
	dlq, queue := b.submissions()
	bus := awsevents.NewEventBus(b.st, jsii.String("JobEvents"), &awsevents.EventBusProps{EventBusName: b.name("jobs")})
	b.topics()
	b.s.FailedEvents = awssqs.NewQueue(b.st, jsii.String("FailedEvents"), &awssqs.QueueProps{
		Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true), RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	suppress(b.s.FailedEvents, nagRule{ID: "AwsSolutions-SQS3", Reason: "this queue is itself the dead-letter queue of the asynchronous invocations"},
		nagRule{ID: "Serverless-SQSRedrivePolicy", Reason: "this queue is itself the dead-letter queue of the asynchronous invocations"})
	bucket := b.bucket()
	b.s.ConsoleKey = b.signingKey("ConsoleKey", "the key operator console sessions are signed with")
	b.s.WebhookKey = b.signingKey("WebhookKey", "the key job callbacks (webhooks) are signed with")
	fns, err := b.functions(table, queue, bus, bucket)
	if err != nil {
		return nil, err
	}
	b.grant(fns, table, queue, bus, bucket)
	b.triggers(fns, queue)
	api := b.httpAPI(fns.api, fns.wait)
	b.clientPolicies(api)
	keyAPI := b.keyAPI(fns.api, fns.wait)

	subnets := b.s.fleets(b, api)
	b.grantLaunch(fns)
	b.grantSpotPool(fns)
	b.registration(fns)
	// The scaler drops and restores the zones of Spot groups by subnet.
	b.env[awsenv.EnvSubnets] = b.st.ToJsonString(subnets, nil)
	if err := b.environment(fns); err != nil {
		return nil, err
	}
	b.acceptFindings(fns)
	b.s.alarms(b.cfg, []awssqs.Queue{dlq, b.s.FailedEvents}, fns.all())

	out := func(id string, v *string) {
		awscdk.NewCfnOutput(b.st, jsii.String(id), &awscdk.CfnOutputProps{Value: v})
	}
	out("ApiUrl", api.ApiEndpoint())
	out("KeyApiUrl", keyAPI.ApiEndpoint())
	out("SubmitQueueUrl", queue.QueueUrl())
	out("TableName", table.TableName())
	out("BucketName", bucket.BucketName())
	out("ConsoleKeyArn", b.s.ConsoleKey.SecretArn())
	out("WebhookKeyArn", b.s.WebhookKey.SecretArn())
	out("AlarmTopicArn", b.s.AlarmTopic.TopicArn())
	for _, a := range b.s.Agents {
		id := "Agent" + strings.ToUpper(a.Arch[:1]) + a.Arch[1:]
		out(id+"Url", a.Asset.S3ObjectUrl())
		out(id+"Sha256", jsii.String(a.SHA256))
	}
	return b.s, nil
}

// signingKey is a generated secret that signs one kind of thing, with no
// fixed name. Its rotation is a new value put with put-secret-value: the
// functions verify with the AWSPREVIOUS version during the rotation window
// and sign with AWSCURRENT (docs/security.md, "Keys").
func (b *build) signingKey(id, purpose string) awssecretsmanager.Secret {
	k := awssecretsmanager.NewSecret(b.st, jsii.String(id), &awssecretsmanager.SecretProps{
		Description: jsii.String("fleetq " + b.stage + ": " + purpose),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
		},
		RemovalPolicy: b.keep,
	})
	suppress(k, nagRule{ID: "AwsSolutions-SMG4", Reason: "a signing key rotated with overlap by put-secret-value (the previous version verifies during the rotation window), as docs/security.md describes; a rotation function would have to reach every holder of the key, which for webhook receivers is outside AWS"})
	return k
}

// agents publishes the agent binary of each architecture the fleets need,
// unless the config's agent_url overrides them.
func (b *build) agents() error {
	arches, err := agentArches(b.cfg)
	if err != nil {
		return fmt.Errorf("infra: %w", err)
	}
	b.s.Agents = map[string]*AgentAsset{}
	if b.cfg.AgentURL != "" {
		return nil
	}
	for _, arch := range arches {
		a, err := b.agentAsset(arch)
		if err != nil {
			return err
		}
		if a.Placeholder {
			b.s.Placeholders = append(b.s.Placeholders, "agent-"+arch)
		}
		b.s.Agents[arch] = a
	}
	return nil
}

// check validates the options and fills in their defaults. Binaries that
// were not built stop synthesis here unless placeholders are allowed.
func (o *Options) check() error {
	cfg := o.Config
	if cfg == nil {
		return fmt.Errorf("infra: no fleet config")
	}
	if len(cfg.Fleets) == 0 {
		return fmt.Errorf("infra: the %s config has no fleets", cfg.Stage)
	}
	if cfg.Region == "" {
		return fmt.Errorf("infra: the %s config names no region", cfg.Stage)
	}
	if o.BinDir == "" {
		o.BinDir = "bin"
	}
	if o.AgentDir == "" {
		o.AgentDir = filepath.Join(o.BinDir, "agent")
	}
	if len(o.ConfigYAML) == 0 {
		return fmt.Errorf("infra: no config text to deploy the functions with")
	}
	if !o.AllowPlaceholders {
		var missing []string
		for _, f := range Functions {
			if _, err := os.Stat(filepath.Join(o.BinDir, f, "bootstrap")); err != nil {
				missing = append(missing, filepath.Join(o.BinDir, f, "bootstrap"))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("infra: no function binaries %v: run `make build` first (tests may synthesize with -c allowPlaceholders=true)", missing)
		}
	}
	return nil
}

// CheckRegion refuses a deployment whose CLI region (the CDK CLI's
// CDK_DEFAULT_REGION, from the profile or AWS_REGION) is not the config's:
// the stack would otherwise be made in one region while its functions and
// zones assume the other.
func CheckRegion(cfg *fleetconfig.Config, cliRegion string) error {
	if cliRegion != "" && cliRegion != cfg.Region {
		return fmt.Errorf("the %s config deploys to %s but the CLI's region is %s: set AWS_REGION=%s (or the profile's region), or change region in the config",
			cfg.Stage, cfg.Region, cliRegion, cfg.Region)
	}
	return nil
}

// build is one stage's synthesis under way: the stack and the settings
// every part of it derives from the stage.
type build struct {
	o     Options
	cfg   *fleetconfig.Config
	stage string
	// prod stages keep their data and their logs longer. keep is the
	// removal policy of their stateful resources (the table, the assets
	// bucket, the secrets, the log groups): RetainExceptOnCreate, kept
	// through stack deletion and replacement but deleted by the rollback
	// of the deploy that created them, so a failed first deploy can be
	// deployed again (docs/deploy.md, "A failed first deploy"). retain is
	// the logs bucket's: a rollback could not delete it once AWS has
	// delivered logs into it, so it is kept even then (it has no fixed
	// name, so a retry makes another). dev keeps nothing.
	prod         bool
	keep, retain awscdk.RemovalPolicy
	logRetention awslogs.RetentionDays
	st           awscdk.Stack
	s            *Stack
	// env holds the value of every variable the stack may set on a
	// function; awsenv.Vars says which functions get it and when.
	env map[string]*string
}

func newBuild(app constructs.Construct, o Options) *build {
	stage := o.Config.Stage
	b := &build{o: o, cfg: o.Config, stage: stage, prod: stage != "dev",
		keep: awscdk.RemovalPolicy_DESTROY, retain: awscdk.RemovalPolicy_DESTROY, logRetention: awslogs.RetentionDays_ONE_WEEK}
	if b.prod {
		b.keep, b.retain, b.logRetention = awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE, awscdk.RemovalPolicy_RETAIN, awslogs.RetentionDays_ONE_MONTH
	}
	b.st = awscdk.NewStack(app, jsii.String("fleetq-"+stage), &awscdk.StackProps{
		Env:         &awscdk.Environment{Region: jsii.String(b.cfg.Region)},
		Description: jsii.String("fleetq control plane, stage " + stage),
	})
	b.s = &Stack{Stack: b.st}
	awscdk.Tags_Of(b.st).Add(jsii.String(TagStage), jsii.String(stage), nil)
	// The stage's cost-allocation tags: on the stack and every taggable
	// resource in it (a fleet's own tags are added in fleets).
	for _, k := range fleetconfig.SortedTagKeys(b.cfg.Tags) {
		// Groups take them from fleets, merged with the fleet's own, so a
		// fleet's value for a key wins over the stage's.
		awscdk.Tags_Of(b.st).Add(jsii.String(k), jsii.String(b.cfg.Tags[k]), &awscdk.TagProps{
			ExcludeResourceTypes: jsii.Strings("AWS::AutoScaling::AutoScalingGroup"),
		})
	}
	return b
}

// name is a resource's physical name in the stage.
func (b *build) name(s string) *string { return jsii.String("fleetq-" + b.stage + "-" + s) }

// table is the state: one table, its two indexes from pkg/aws/store's schema.
func (b *build) table() awsdynamodb.Table {
	table := awsdynamodb.NewTable(b.st, jsii.String("Table"), &awsdynamodb.TableProps{
		TableName:                        jsii.String(fleetconfig.TableName(b.stage)),
		PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String(store.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:                          &awsdynamodb.Attribute{Name: jsii.String(store.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
		TimeToLiveAttribute:              jsii.String(store.AttrTTL),
		// No deletion protection: the rollback of a failed first deploy
		// must be able to delete the table, whose name is fixed, or every
		// retry fails with "already exists". RetainExceptOnCreate keeps it
		// through every later stack operation (docs/deploy.md).
		DeletionProtection: jsii.Bool(false),
		RemovalPolicy:      b.keep,
	})
	table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:        jsii.String(store.IndexByState),
		PartitionKey:     &awsdynamodb.Attribute{Name: jsii.String(store.AttrGSI1PK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:          &awsdynamodb.Attribute{Name: jsii.String(store.AttrGSI1SK), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType:   awsdynamodb.ProjectionType_INCLUDE,
		NonKeyAttributes: jsii.Strings(store.ByStateProjection...),
	})
	table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:        jsii.String(store.IndexByInstance),
		PartitionKey:     &awsdynamodb.Attribute{Name: jsii.String(store.AttrGSI2PK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:          &awsdynamodb.Attribute{Name: jsii.String(store.AttrGSI2SK), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType:   awsdynamodb.ProjectionType_INCLUDE,
		NonKeyAttributes: jsii.Strings(store.ByInstanceProjection...),
	})
	return table
}

// submissions is the queue producers (and the API) send to, with its DLQ.
func (b *build) submissions() (dlq, queue awssqs.Queue) {
	dlq = awssqs.NewQueue(b.st, jsii.String("SubmitDLQ"), &awssqs.QueueProps{
		QueueName: b.name("submit-dlq"), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	queue = awssqs.NewQueue(b.st, jsii.String("SubmitQueue"), &awssqs.QueueProps{
		QueueName: b.name("submit"), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		// Six times the dispatch function's timeout, as Lambda advises for
		// SQS event sources.
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(180)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(5)},
	})
	suppress(dlq, nagRule{ID: "Serverless-SQSRedrivePolicy", Reason: "this queue is itself the submission queue's dead-letter queue"})
	return dlq, queue
}

// topics are the stage's SNS topics: alarms (subscribed by the config's
// emails) and scaling events.
func (b *build) topics() {
	b.s.AlarmTopic = awssns.NewTopic(b.st, jsii.String("Alarms"), &awssns.TopicProps{
		DisplayName: jsii.String("fleetq " + b.stage + " alarms"), EnforceSSL: jsii.Bool(true),
	})
	b.s.ScalingTopic = awssns.NewTopic(b.st, jsii.String("ScalingEvents"), &awssns.TopicProps{
		DisplayName: jsii.String("fleetq " + b.stage + " scaling events"), EnforceSSL: jsii.Bool(true),
	})
	for _, t := range []awssns.Topic{b.s.AlarmTopic, b.s.ScalingTopic} {
		suppress(t, nagRule{ID: "AwsSolutions-SNS2", Reason: "CloudWatch alarms and Auto Scaling publish here; a KMS key would need a key policy for both services, and the messages name resources, never data"})
	}
}

// bucket holds the tenants' job inputs and outputs, expired after 30 days;
// its access logs go to a logs bucket, which also keeps the VPC's flow logs.
func (b *build) bucket() awss3.Bucket {
	b.s.logs = awss3.NewBucket(b.st, jsii.String("Logs"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id: jsii.String("expire-logs"), Expiration: awscdk.Duration_Days(jsii.Number(90)),
		}},
		RemovalPolicy:     b.retain,
		AutoDeleteObjects: jsii.Bool(!b.prod),
	})
	suppress(b.s.logs, nagRule{ID: "AwsSolutions-S1", Reason: "this is the access-log bucket; logging its own accesses would loop"})
	return awss3.NewBucket(b.st, jsii.String("Assets"), &awss3.BucketProps{
		ServerAccessLogsBucket: b.s.logs, ServerAccessLogsPrefix: jsii.String("assets-access/"),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id: jsii.String("expire-tenant-objects"), Prefix: jsii.String("tenants/"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(30)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		RemovalPolicy:     b.keep,
		AutoDeleteObjects: jsii.Bool(!b.prod),
	})
}

// functions are the stage's five Lambda functions.
type functions struct {
	api, dispatch, scaler, interruption, wait awslambda.Function
}

func (f functions) all() []awslambda.Function {
	return []awslambda.Function{f.api, f.dispatch, f.scaler, f.interruption, f.wait}
}

func (f functions) byName(fn awsenv.Function) awslambda.Function {
	return map[awsenv.Function]awslambda.Function{awsenv.API: f.api, awsenv.Dispatch: f.dispatch,
		awsenv.Scaler: f.scaler, awsenv.Interruption: f.interruption, awsenv.Wait: f.wait}[fn]
}

// functions builds the five functions and the values of their
// environment (set by environment once the fleets exist).
func (b *build) functions(table awsdynamodb.Table, queue awssqs.Queue, bus awsevents.EventBus, bucket awss3.Bucket) (fns functions, err error) {
	defer func() {
		// function panics with a staging error (a full disk, say): return it.
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	groups := map[string]string{}
	for _, f := range b.cfg.Fleets {
		groups[f.Slug] = GroupName(b.stage, f.Slug)
	}
	groupsJSON, _ := json.Marshal(groups)
	odJSON, _ := json.Marshal(onDemandGroupNames(b.cfg))
	b.env = map[string]*string{
		awsenv.EnvStage:               jsii.String(b.stage),
		awsenv.EnvConfigFile:          jsii.String("/var/task/" + ConfigFileName),
		awsenv.EnvTable:               table.TableName(),
		awsenv.EnvLogLevel:            jsii.String("info"),
		awsenv.EnvSubmitQueueURL:      queue.QueueUrl(),
		awsenv.EnvConsoleKeyARN:       b.s.ConsoleKey.SecretArn(),
		awsenv.EnvWebhookKeyARN:       b.s.WebhookKey.SecretArn(),
		awsenv.EnvBucket:              bucket.BucketName(),
		awsenv.EnvEventBus:            bus.EventBusName(),
		awsenv.EnvFleetGroups:         jsii.String(string(groupsJSON)),
		awsenv.EnvFleetOnDemandGroups: jsii.String(string(odJSON)),
		// EnvSubnets: set in New once the fleets' subnets exist.
	}
	return functions{
		// api: one request at a time, a few DynamoDB calls each; 256 MB
		// keeps cold starts short; 29 s is API Gateway's own limit.
		api: b.function(awsenv.API, 256, 29),
		// dispatch: batches of 10 conditional puts, plus a wake; 30 s is ample.
		dispatch: b.function(awsenv.Dispatch, 256, 30),
		// scaler: every fleet in turn, each a handful of reads and writes
		// and Auto Scaling calls with retries; well inside its one-minute
		// period. A failed tick is not retried: the next one, a minute
		// later, decides from fresh state.
		// It also delivers job callbacks (webhooks.allowed_hosts), signed
		// with the webhook key.
		scaler: b.function(awsenv.Scaler, 256, 50),
		// interruption: one event, a few writes and one Auto Scaling call.
		interruption: b.function(awsenv.Interruption, 128, 30),
		// wait: the API's handler for the wait route only, each request
		// held up to 25 s reading one job a second; 128 MB halves what a
		// held second costs. Its reserved concurrency (wait_concurrency)
		// caps the waits at once, so they never take the concurrency the
		// API function's workers need.
		wait: b.waitFunction(),
	}, nil
}

// waitFunction is the function of the wait route, capped by its reserved
// concurrency.
func (b *build) waitFunction() awslambda.Function {
	fn := b.function(awsenv.Wait, 128, 29)
	fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(float64(b.cfg.WaitConcurrency)))
	return fn
}

// environment sets on each function the variables awsenv.Vars declares for
// it under the stage's config, with their values from b.env. A declared
// variable without a value, or a value no function is declared to read,
// stops synthesis: the environment is written once, in awsenv.Vars.
func (b *build) environment(fns functions) error {
	used := map[string]bool{}
	for _, fn := range awsenv.Functions {
		for _, name := range awsenv.StackSets(fn, b.cfg) {
			v, ok := b.env[name]
			if !ok {
				return fmt.Errorf("infra: awsenv.Vars declares %s for the %s function but the stack has no value for it", name, fn)
			}
			fns.byName(fn).AddEnvironment(jsii.String(name), v, nil)
			used[name] = true
		}
	}
	for name := range b.env {
		if !used[name] && !b.conditional(name) {
			return fmt.Errorf("infra: the stack has a value for %s but awsenv.Vars declares it for no function", name)
		}
	}
	return nil
}

// conditional reports whether awsenv.Vars sets name under some condition
// (its value may then go unused by a stage's config).
func (b *build) conditional(name string) bool {
	for _, v := range awsenv.Vars {
		if v.Name == name && v.When != nil {
			return true
		}
	}
	return false
}

// function is one Lambda function on arm64 with its log group; its
// environment is set by environment.
func (b *build) function(fn awsenv.Function, memory, timeoutSec float64) awslambda.Function {
	id := string(fn)
	code, placeholder, err := functionCode(b.o.BinDir, b.stage, id, b.o.ConfigYAML, b.o.AllowPlaceholders)
	if err != nil {
		panic(err)
	}
	if placeholder {
		b.s.Placeholders = append(b.s.Placeholders, id)
	}
	title := strings.ToUpper(id[:1]) + id[1:]
	logs := awslogs.NewLogGroup(b.st, jsii.String(title+"Logs"), &awslogs.LogGroupProps{
		Retention: b.logRetention, RemovalPolicy: b.keep,
	})
	return awslambda.NewFunction(b.st, jsii.String(title), &awslambda.FunctionProps{
		FunctionName: b.name(id),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         code,
		MemorySize:   jsii.Number(memory),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeoutSec)),
		LogGroup:     logs,
	})
}

// grant gives each function exactly what it calls.
func (b *build) grant(fns functions, table awsdynamodb.Table, queue awssqs.Queue, bus awsevents.EventBus, bucket awss3.Bucket) {
	st := b.st
	for _, f := range fns.all() {
		table.GrantReadWriteData(f)
	}
	queue.GrantSendMessages(fns.api)
	// The API presigns GETs and PUTs of job files: nothing more.
	fns.api.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("s3:GetObject", "s3:PutObject"), Resources: &[]*string{bucket.ArnForObjects(jsii.String("tenants/*"))},
	}))
	bus.GrantPutEventsTo(fns.api, nil)
	bus.GrantPutEventsTo(fns.scaler, nil)
	b.s.ConsoleKey.GrantRead(fns.api, nil)
	b.s.WebhookKey.GrantRead(fns.scaler, nil)
	// The asynchronous functions keep what they could not handle.
	for _, f := range []awslambda.Function{fns.scaler, fns.interruption} {
		f.Node().DefaultChild().(awslambda.CfnFunction).SetDeadLetterConfig(&awslambda.CfnFunction_DeadLetterConfigProperty{TargetArn: b.s.FailedEvents.QueueArn()})
		b.s.FailedEvents.GrantSendMessages(f)
	}
	// A tick is worth nothing a minute later: no retry, no old events.
	fns.scaler.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{RetryAttempts: jsii.Number(0), MaxEventAge: awscdk.Duration_Seconds(jsii.Number(60)),
		OnFailure: awslambdadestinations.NewSqsDestination(b.s.FailedEvents)})
	groupARN := st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("autoscaling"), Resource: jsii.String("autoScalingGroup"),
		ResourceName: jsii.String("*:autoScalingGroupName/fleetq-" + b.stage + "-*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})
	tagged := &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:ResourceTag/" + TagStage: b.stage}}
	// Describe* actions support no resource-level permissions: "*" is the
	// narrowest resource AWS accepts for them.
	describe := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings("autoscaling:DescribeAutoScalingGroups"), Resources: jsii.Strings("*")})
	fns.scaler.AddToRolePolicy(describe)
	if rungs(b.cfg) {
		// The fallback ladder reads the Spot groups' launch failures.
		fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings("autoscaling:DescribeScalingActivities"), Resources: jsii.Strings("*")}))
	}
	// The scaler reads the fleets' Spot prices by zone for the cost of jobs
	// (ec2:DescribeSpotPriceHistory has no resource-level permission either).
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("ec2:DescribeSpotPriceHistory"), Resources: jsii.Strings("*")}))
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		// UpdateAutoScalingGroup: the Spot groups' instance type order and
		// subnets (docs/scaling.md, "Weighing down interrupted types and zones").
		Actions:   jsii.Strings("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup", "autoscaling:UpdateAutoScalingGroup"),
		Resources: &[]*string{groupARN}, Conditions: tagged,
	}))
	if bridges(b.cfg) {
		// A bridge stopped into its pool: the group scales in the one
		// instance left unprotected (asg.Adapter.StopIntoPool).
		fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings("autoscaling:SetInstanceProtection"), Resources: &[]*string{groupARN}, Conditions: tagged,
		}))
	}
	fns.dispatch.AddToRolePolicy(describe)
	fns.dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("autoscaling:SetDesiredCapacity"), Resources: &[]*string{groupARN}, Conditions: tagged,
	}))
	fns.interruption.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("autoscaling:CompleteLifecycleAction"), Resources: &[]*string{groupARN}, Conditions: tagged,
	}))
}

// workerRoleARNs are the fleets' worker roles, in the config's order.
func (s *Stack) workerRoleARNs(cfg *fleetconfig.Config) *[]*string {
	var out []*string
	for _, f := range cfg.Fleets {
		out = append(out, s.workerRoles[f.Slug].RoleArn())
	}
	return &out
}

// registration gives the API what it checks registrations against, once
// the fleets are built (in b.env; environment sets them): each fleet's
// worker role and groups (attested
// registration; Auto Scaling's DescribeAutoScalingInstances finds an
// instance's group), and a Secrets Manager secret of its own for each
// fleet whose config accepts one. No worker role may read those secrets.
func (b *build) registration(fns functions) {
	roles := map[string]*string{}
	secrets := map[string]*string{}
	for _, f := range b.cfg.Fleets {
		roles[f.Slug] = b.s.workerRoles[f.Slug].RoleArn()
		if !f.AcceptSecret {
			continue
		}
		secret := awssecretsmanager.NewSecret(b.st, jsii.String(camel(f.Slug)+"FleetSecret"), &awssecretsmanager.SecretProps{
			Description: jsii.String("fleetq " + b.stage + ": the secret workers outside AWS register into fleet " + f.Slug + " with"),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				PasswordLength: jsii.Number(48), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
			},
			RemovalPolicy: b.keep,
		})
		suppress(secret, nagRule{ID: "AwsSolutions-SMG4", Reason: "a fleet secret only gates registration into its fleet from outside AWS; it is rotated with put-secret-value and a rotation window, as docs/security.md describes"})
		secret.GrantRead(fns.api, nil)
		secrets[f.Slug] = secret.SecretArn()
	}
	b.env[awsenv.EnvWorkerRoles] = b.st.ToJsonString(roles, nil)
	if len(secrets) > 0 {
		b.env[awsenv.EnvFleetSecrets] = b.st.ToJsonString(secrets, nil)
		awscdk.NewCfnOutput(b.st, jsii.String("FleetSecretArns"), &awscdk.CfnOutputProps{Value: b.st.ToJsonString(secrets, nil)})
	}
	// The fleets' groups (FLEETQ_FLEET_GROUPS, FLEETQ_FLEET_ON_DEMAND_GROUPS)
	// are in b.env already; awsenv.Vars gives them to the API too.
	// Describe* actions support no resource-level permissions.
	fns.api.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("autoscaling:DescribeAutoScalingInstances"), Resources: jsii.Strings("*")}))
}

// grantLaunch lets the scaler launch from the Spot groups' templates, once
// the fleets are built: Auto Scaling checks that whoever updates a group
// with a launch template may launch from it (ec2:RunInstances, and
// iam:PassRole for its instance profile); allowed for the stage's Spot
// templates only. The scaler launches no instance itself but a stopped
// Spot pool's (grantSpotPool).
func (b *build) grantLaunch(fns functions) {
	if len(b.s.spotTemplates) == 0 {
		return
	}
	fromTemplates := map[string]interface{}{"ec2:LaunchTemplate": b.s.spotTemplates}
	// The image must be the template's own: a launch that names another
	// is refused (ec2:IsLaunchTemplateResource is false for it).
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("LaunchTemplateImageOnly"), Actions: jsii.Strings("ec2:RunInstances"),
		Resources:  &[]*string{b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ec2"), Account: jsii.String(""), Resource: jsii.String("image"), ResourceName: jsii.String("*")})},
		Conditions: &map[string]interface{}{"ArnEquals": fromTemplates, "Bool": map[string]interface{}{"ec2:IsLaunchTemplateResource": "true"}},
	}))
	// The other resources of a launch (the instance, its volumes and
	// network interface, the group's subnets and security group, the Spot
	// request) only from the stage's templates: Auto Scaling adds the
	// group's subnets and instance types to the template's settings.
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("LaunchFromStageTemplates"), Actions: jsii.Strings("ec2:RunInstances"),
		NotResources: &[]*string{b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ec2"), Account: jsii.String(""), Resource: jsii.String("image"), ResourceName: jsii.String("*")})},
		Conditions:   &map[string]interface{}{"ArnEquals": fromTemplates},
	}))
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("iam:PassRole"), Resources: b.s.workerRoleARNs(b.cfg),
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"iam:PassedToService": "ec2.amazonaws.com"}},
	}))
	// The templates tag the instance and its volume at launch, which the
	// launch's caller must be allowed (ec2:CreateTags at RunInstances, with
	// the stage's tag the templates carry).
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("TagAtLaunch"), Actions: jsii.Strings("ec2:CreateTags"),
		Resources: &[]*string{
			b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ec2"), Resource: jsii.String("instance"), ResourceName: jsii.String("*")}),
			b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ec2"), Resource: jsii.String("volume"), ResourceName: jsii.String("*")}),
		},
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{
			"ec2:CreateAction": "RunInstances", "aws:RequestTag/" + TagStage: b.stage}},
	}))
	// A template whose image is resolve:ssm: is usable only by whoever
	// may read that parameter: Auto Scaling validates its value when the
	// group is updated ("Use AWS Systems Manager parameters instead of AMI
	// IDs in launch templates", Auto Scaling user guide).
	if params := b.imageParameters(); len(params) > 0 {
		fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("TemplateImageParameters"), Actions: jsii.Strings("ssm:GetParameters"), Resources: &params,
		}))
	}
}

// imageParameters are the ARNs of the SSM parameters the fleets' launch
// templates take their image from, once each: AWS's public parameters
// (/aws/service/...) have no account in their ARN, the stage's own are in
// the stack's account, and a parameter named by its ARN (shared from
// another account) is that ARN.
func (b *build) imageParameters() []*string {
	var out []*string
	seen := map[string]bool{}
	for _, f := range b.cfg.Fleets {
		p := f.AMISSMParameter
		if f.AMIID != "" || p == "" || seen[p] {
			continue
		}
		seen[p] = true
		if strings.HasPrefix(p, "arn:") {
			out = append(out, jsii.String(p))
			continue
		}
		arn := &awscdk.ArnComponents{Service: jsii.String("ssm"), Resource: jsii.String("parameter"), ResourceName: jsii.String(strings.TrimPrefix(p, "/"))}
		if strings.HasPrefix(p, "/aws/service/") {
			arn.Account = jsii.String("")
		}
		out = append(out, b.st.FormatArn(arn))
	}
	return out
}

// triggers wire dispatch to the queue, the scaler to its schedule, and the
// interruption handler to the EC2 and Auto Scaling events of the stage's
// groups and to its own schedule (the sweep of held terminations, which
// heartbeats their lifecycle actions).
func (b *build) triggers(fns functions, queue awssqs.Queue) {
	st := b.st
	fns.dispatch.AddEventSource(awslambdaeventsources.NewSqsEventSource(queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(1)),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(10),
	}))
	awsevents.NewRule(st, jsii.String("ScalerTick"), &awsevents.RuleProps{
		RuleName: b.name("scaler-tick"),
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns.scaler, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0), MaxEventAge: awscdk.Duration_Seconds(jsii.Number(60)), DeadLetterQueue: b.s.FailedEvents,
		})},
	})
	target := &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns.interruption, &awseventstargets.LambdaFunctionProps{
		RetryAttempts: jsii.Number(8), MaxEventAge: awscdk.Duration_Hours(jsii.Number(1)), DeadLetterQueue: b.s.FailedEvents,
	})}
	b.interruptionRules(target)
	// Held terminations (an instance draining while its terminate hook
	// waits) are swept once a minute: completed when idle or at the drain
	// deadline, heartbeated meanwhile (docs/scaling.md).
	awsevents.NewRule(st, jsii.String("TerminationSweep"), &awsevents.RuleProps{
		RuleName: b.name("termination-sweep"),
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		// The next minute sweeps again: no retries; a lost invocation is
		// kept in the failed-events queue like the scaler's.
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns.interruption, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0), MaxEventAge: awscdk.Duration_Seconds(jsii.Number(60)), DeadLetterQueue: b.s.FailedEvents,
		})},
	})
	fns.interruption.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("autoscaling:RecordLifecycleActionHeartbeat"),
		Resources: &[]*string{st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("autoscaling"), Resource: jsii.String("autoScalingGroup"),
			ResourceName: jsii.String("*:autoScalingGroupName/fleetq-" + b.stage + "-*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})},
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:ResourceTag/" + TagStage: b.stage}},
	}))
}

// interruptionRules route the events the interruption handler takes to
// target: one rule per rule of interruption.HandledEvents, with its source,
// its detail types and its detail filter (narrowed to the stage's groups
// where the table says so).
func (b *build) interruptionRules(target *[]awsevents.IRuleTarget) {
	var order []interruption.Rule
	byRule := map[interruption.Rule][]interruption.Handled{}
	for _, h := range interruption.HandledEvents() {
		if _, ok := byRule[h.Rule]; !ok {
			order = append(order, h.Rule)
		}
		byRule[h.Rule] = append(byRule[h.Rule], h)
	}
	for _, r := range order {
		hs := byRule[r]
		var types []string
		for _, h := range hs {
			types = append(types, h.DetailType)
		}
		pattern := &awsevents.EventPattern{Source: jsii.Strings(hs[0].Source), DetailType: jsii.Strings(types...)}
		detail := map[string]interface{}{}
		for k, v := range hs[0].Detail {
			detail[k] = v
		}
		if hs[0].OfGroups {
			detail["AutoScalingGroupName"] = groupNames(b.cfg)
		}
		if len(detail) > 0 {
			pattern.Detail = &detail
		}
		awsevents.NewRule(b.st, jsii.String(r.ID), &awsevents.RuleProps{RuleName: b.name(r.Name), EventPattern: pattern, Targets: target})
	}
}

// httpAPI is the HTTP API in front of the api function, its routes taken
// from pkg/service/api's route table: worker routes check the fleet secret and
// tokens in the handler; producer and operator routes need IAM (SigV4).
// Every other method and path goes to the handler too (no authorizer), so
// a wrong path or method is answered in the API's error shape; the handler
// itself refuses operator routes without an IAM identity.
func (b *build) httpAPI(fn, wait awslambda.Function) awsapigatewayv2.HttpApi {
	st := b.st
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), fn, nil)
	waits := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("WaitIntegration"), wait, nil)
	httpAPI := awsapigatewayv2.NewHttpApi(st, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName: b.name("api"), CreateDefaultStage: jsii.Bool(false), DefaultIntegration: integration,
	})
	iam := awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	for _, r := range api.Routes() {
		opts := &awsapigatewayv2.AddRoutesOptions{Path: jsii.String(r.Pattern),
			Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)}, Integration: routeIntegration(r, integration, waits)}
		if IAMRoute(r) {
			opts.Authorizer = iam
		}
		routes := httpAPI.AddRoutes(opts)
		if !IAMRoute(r) {
			reason := reasonWorkerRoutes
			if r.Auth == api.AuthConsole || r.Auth == api.AuthConsoleLogin {
				reason = reasonConsoleRoutes
			}
			for _, route := range *routes {
				suppress(route, nagRule{ID: "AwsSolutions-APIG4", Reason: reason})
			}
		}
	}
	suppress(httpAPI.Node().FindChild(jsii.String("DefaultRoute")), nagRule{ID: "AwsSolutions-APIG4",
		Reason: "the $default route answers unknown paths in the API's error shape; the handler refuses operator routes without an IAM identity"})
	accessLogs := awslogs.NewLogGroup(st, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{Retention: b.logRetention, RemovalPolicy: b.keep})
	awsapigatewayv2.NewCfnStage(st, jsii.String("ApiStage"), &awsapigatewayv2.CfnStageProps{
		ApiId: httpAPI.ApiId(), StageName: jsii.String("$default"), AutoDeploy: jsii.Bool(true),
		DefaultRouteSettings: &awsapigatewayv2.CfnStage_RouteSettingsProperty{
			ThrottlingBurstLimit: jsii.Number(200), ThrottlingRateLimit: jsii.Number(100),
		},
		AccessLogSettings: &awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
			DestinationArn: accessLogs.LogGroupArn(),
			Format: jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","method":"$context.httpMethod",` +
				`"path":"$context.path","status":"$context.status","latency":"$context.responseLatency","caller":"$context.identity.caller"}`),
		},
	})
	return httpAPI
}

// keyAPI is the second HTTP API in front of the api function: the producer
// routes, same paths, without an API Gateway authorizer, for producers
// outside AWS with a tenant's API key (docs/security.md, "How the API
// authorizes a route that takes IAM or a key"). A route has one authorizer,
// and IAM's refuses an unsigned request, so keys cannot share the IAM
// API's routes. The handler checks the key on every request; a request here
// has no IAM identity, so nothing else lets it in. Other paths are API
// Gateway's own 404.
func (b *build) keyAPI(fn, wait awslambda.Function) awsapigatewayv2.HttpApi {
	st := b.st
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("KeyApiIntegration"), fn, nil)
	waits := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("KeyApiWaitIntegration"), wait, nil)
	keyAPI := awsapigatewayv2.NewHttpApi(st, jsii.String("KeyApi"), &awsapigatewayv2.HttpApiProps{
		ApiName: b.name("key-api"), CreateDefaultStage: jsii.Bool(false),
	})
	for _, r := range api.Routes() {
		if !ProducerRoute(r) {
			continue
		}
		routes := keyAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{Path: jsii.String(r.Pattern),
			Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)}, Integration: routeIntegration(r, integration, waits)})
		for _, route := range *routes {
			suppress(route, nagRule{ID: "AwsSolutions-APIG4", Reason: reasonKeyRoutes})
		}
	}
	accessLogs := awslogs.NewLogGroup(st, jsii.String("KeyApiAccessLogs"), &awslogs.LogGroupProps{Retention: b.logRetention, RemovalPolicy: b.keep})
	awsapigatewayv2.NewCfnStage(st, jsii.String("KeyApiStage"), &awsapigatewayv2.CfnStageProps{
		ApiId: keyAPI.ApiId(), StageName: jsii.String("$default"), AutoDeploy: jsii.Bool(true),
		DefaultRouteSettings: &awsapigatewayv2.CfnStage_RouteSettingsProperty{
			ThrottlingBurstLimit: jsii.Number(200), ThrottlingRateLimit: jsii.Number(100),
		},
		AccessLogSettings: &awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
			DestinationArn: accessLogs.LogGroupArn(),
			Format: jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","method":"$context.httpMethod",` +
				`"path":"$context.path","status":"$context.status","latency":"$context.responseLatency"}`),
		},
	})
	return keyAPI
}

func groupNames(cfg *fleetconfig.Config) []string {
	var out []string
	for _, f := range cfg.Fleets {
		out = append(out, GroupName(cfg.Stage, f.Slug))
		if hasOnDemandGroup(f) {
			out = append(out, OnDemandGroupName(cfg.Stage, f.Slug))
		}
	}
	return out
}

// ConfigFileName is the fleet config inside every function's package.
const ConfigFileName = "fleet.yaml"

// functionCode stages a function's package: bin/<name>/bootstrap as `make
// build` made it (else a placeholder bootstrap that only says to build
// first) and the fleet config.
func functionCode(binDir, stage, name string, configYAML []byte, allowPlaceholder bool) (awslambda.Code, bool, error) {
	dir := filepath.Join(os.TempDir(), "fleetq-cdk-assets", stage, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	bootstrap, err := os.ReadFile(filepath.Join(binDir, name, "bootstrap"))
	placeholder := err != nil
	if placeholder && !allowPlaceholder {
		return nil, false, fmt.Errorf("infra: %w: run `make build` first", err)
	}
	if placeholder {
		bootstrap = []byte("#!/bin/sh\necho 'fleetq " + name + ": deployed without its binary; run make build, then deploy again' >&2\nexit 1\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), bootstrap, 0o755); err != nil {
		return nil, false, err
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), configYAML, 0o644); err != nil {
		return nil, false, err
	}
	return awslambda.Code_FromAsset(jsii.String(dir), nil), placeholder, nil
}

// LoadConfig reads the stage's fleet config — file when given (it must be
// of that stage), else the built-in config/<stage>.yaml — and answers it
// with its text, which the functions are deployed with. Validation errors
// name the file, the field and the problem, and stop synthesis.
func LoadConfig(stage, file string) (*fleetconfig.Config, []byte, error) {
	if file == "" {
		raw, ok := config.Stage(stage)
		if !ok {
			_, err := fleetconfig.ForStage(stage)
			return nil, nil, err
		}
		cfg, err := fleetconfig.Parse("config/"+stage+".yaml", raw)
		return cfg, raw, err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := fleetconfig.Parse(file, raw)
	if err != nil {
		return nil, nil, err
	}
	if stage != "" && cfg.Stage != stage {
		return nil, nil, fmt.Errorf("%s is the config of stage %q, not %q", file, cfg.Stage, stage)
	}
	return cfg, raw, nil
}

// WaitRoute reports whether API Gateway sends a route to the wait function
// rather than the API function: the producers' wait, held open for seconds.
func WaitRoute(r api.Route) bool { return r.Method == http.MethodGet && r.Pattern == wire.PathJobWait }

// routeIntegration is the integration of a route: the wait function's for
// the wait route, the API function's for every other.
func routeIntegration(r api.Route, fn, wait awsapigatewayv2.HttpRouteIntegration) awsapigatewayv2.HttpRouteIntegration {
	if WaitRoute(r) {
		return wait
	}
	return fn
}
