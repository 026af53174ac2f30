package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// nagRule is a cdk-nag finding accepted on one resource, with the reason.
// cdk-nag reads them from the resource's "cdk_nag" metadata in the
// template (infra/nag_test.go runs its rule packs over it).
type nagRule struct {
	ID, Reason string
	// AppliesTo narrows a suppression to some findings of the rule (for
	// CdkNagValidationFailure, the rule that could not run).
	AppliesTo []string
}

// suppress records accepted findings on c's CloudFormation resource (c
// itself, or its default child for a higher-level construct).
func suppress(c constructs.IConstruct, rules ...nagRule) {
	res, ok := c.(awscdk.CfnResource)
	if !ok {
		res, ok = c.Node().DefaultChild().(awscdk.CfnResource)
	}
	if !ok {
		panic("infra: no CloudFormation resource to suppress cdk-nag findings on: " + *c.Node().Path())
	}
	var list []map[string]interface{}
	if prev, ok := res.GetMetadata(jsii.String("cdk_nag")).(map[string]interface{}); ok {
		if old, ok := prev["rules_to_suppress"].([]interface{}); ok {
			for _, o := range old {
				if m, ok := o.(map[string]interface{}); ok {
					list = append(list, m)
				}
			}
		}
	}
	for _, r := range rules {
		m := map[string]interface{}{"id": r.ID, "reason": r.Reason}
		if len(r.AppliesTo) > 0 {
			m["applies_to"] = r.AppliesTo
		}
		list = append(list, m)
	}
	res.AddMetadata(jsii.String("cdk_nag"), map[string]interface{}{"rules_to_suppress": list})
}

// Reasons shared by several resources.
const (
	reasonBasicExecution = "AWSLambdaBasicExecutionRole only allows writing the function's own CloudWatch Logs; a copy as an inline policy would say the same"
	reasonWorkerRoutes   = "worker routes authenticate in the handler: registration by the fleet secret (rate-limited per address), every other call by a per-worker bearer token, both compared in constant time"
	reasonKeyRoutes      = "producer routes of the key API authenticate in the handler by a tenant's API key (256 random bits, stored as its SHA-256, compared in constant time, revocable at once); IAM cannot share a route with a key, and the IAM API serves the same routes with IAM authorization (docs/security.md)"
	reasonConsoleRoutes  = "operator console routes authenticate in the handler: a browser cannot sign with IAM, so a one-hour session cookie (SameSite=Strict, HttpOnly) signed with the console's own key, from a one-time login obtained through the IAM-authorized console-session route, ended by sign-out; and a CSRF token on every form"
	reasonTracing        = "fleetq traces through structured JSON logs with job and worker ids and the scaler's metrics; X-Ray would add cost and a '*' permission for no extra answer yet"
)

// eachResource calls fn for every CloudFormation resource of typ in scope.
func eachResource(scope constructs.IConstruct, typ string, fn func(awscdk.CfnResource)) {
	for _, c := range *scope.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if r, ok := c.(awscdk.CfnResource); ok && *r.CfnResourceType() == typ {
			fn(r)
		}
	}
}

// acceptFindings records, once the stack is built, the reasons for the
// findings that are accepted rather than fixed. A resource not named here
// keeps its findings, so a new policy or function is checked afresh.
func (b *build) acceptFindings(fns functions) {
	policyReasons := map[string]string{
		"Api":          "wildcards only below named resources: the table's indexes (index/*), tenants/* objects of the assets bucket (the API presigns any tenant's job files); autoscaling:DescribeAutoScalingInstances (attested registration finds an instance's group) has no resource-level permission",
		"Dispatch":     "wildcards only below named resources: the table's indexes (index/*), groups named fleetq-<stage>-* and tagged fleetq:stage; DescribeAutoScalingGroups has no resource-level permission; with a Spot pool, ec2:DescribeInstances (no resource-level permission) and ec2:StartInstances on instance/* only where the instance carries the stage's tag and fleetq:pool=spot",
		"Scaler":       "wildcards only below named resources: the table's indexes (index/*), groups named fleetq-<stage>-* and tagged fleetq:stage; DescribeAutoScalingGroups, DescribeScalingActivities and ec2:DescribeSpotPriceHistory (the fleets' Spot prices, read about once an hour for the cost of jobs) have no resource-level permission; ec2:RunInstances is conditioned on the stage's Spot launch templates (ec2:LaunchTemplate), with the template's own image only (ec2:IsLaunchTemplateResource), the check Auto Scaling makes when the scaler reorders a Spot group's types; ec2:CreateTags only on the instances and volumes a launch creates (ec2:CreateAction RunInstances) with the stage's tag, which the templates tag at launch; with a Spot pool, ec2:DescribeInstances (no resource-level permission) and starting, stopping, terminating instances and cancelling Spot requests (instance/*, spot-instances-request/*) only where they carry the stage's tag and fleetq:pool=spot",
		"Interruption": "wildcards only below named resources: the table's indexes (index/*), groups named fleetq-<stage>-* and tagged fleetq:stage",
		"Wait":         "wildcards only below named resources: the table's indexes (index/*)",
	}
	for _, f := range b.cfg.Fleets {
		policyReasons[camel(f.Slug)+"WorkerRole"] = "wildcards only below named resources: the streams of the fleet's own log group (<group>:*) and groups named fleetq-<stage>-* and tagged fleetq:stage; Session Manager's ssmmessages and ec2messages actions and ssm:UpdateInstanceInformation (no parameter read) have no narrower resource"
	}
	for id, reason := range policyReasons {
		if c := b.st.Node().TryFindChild(jsii.String(id)); c != nil {
			eachResource(c, "AWS::IAM::Policy", func(r awscdk.CfnResource) {
				suppress(r, nagRule{ID: "AwsSolutions-IAM5", Reason: reason})
			})
		}
	}
	for _, f := range fns.all() {
		suppress(f.Role(), nagRule{ID: "AwsSolutions-IAM4", Reason: reasonBasicExecution})
		suppress(f, nagRule{ID: "Serverless-LambdaTracing", Reason: reasonTracing})
	}
	for _, f := range []awslambda.Function{fns.api, fns.wait} {
		suppress(f, nagRule{ID: "Serverless-LambdaDLQ", Reason: "invoked synchronously by API Gateway: a failure is answered to the caller, there is no event to keep"})
	}
	suppress(fns.dispatch, nagRule{ID: "Serverless-LambdaDLQ", Reason: "invoked by its SQS event source: a submission that keeps failing is redriven to the submission DLQ, which has an alarm"})
	eachResource(fns.dispatch, "AWS::Lambda::EventSourceMapping", func(r awscdk.CfnResource) {
		suppress(r, nagRule{ID: "Serverless-LambdaEventSourceMappingDestination", Reason: "an SQS event source takes no on-failure destination; the queue's redrive policy sends failures to the submission DLQ"})
	})
	// dev's bucket is emptied on delete by the CDK's own provider function.
	if c := b.st.Node().TryFindChild(jsii.String("Custom::S3AutoDeleteObjectsCustomResourceProvider")); c != nil {
		reason := "the CDK's own provider that empties the dev stage's bucket on delete; it runs once, at stack deletion"
		eachResource(c, "AWS::Lambda::Function", func(r awscdk.CfnResource) {
			suppress(r, nagRule{ID: "AwsSolutions-L1", Reason: reason}, nagRule{ID: "Serverless-LambdaLatestVersion", Reason: reason},
				nagRule{ID: "Serverless-LambdaDLQ", Reason: reason}, nagRule{ID: "Serverless-LambdaTracing", Reason: reason})
		})
		eachResource(c, "AWS::IAM::Role", func(r awscdk.CfnResource) {
			suppress(r, nagRule{ID: "AwsSolutions-IAM4", Reason: reason})
		})
	}
}
