package infra

import (
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/service/api"
)

// ProducerRoute reports whether a route is one a producer calls (submit,
// read and cancel a job, its logs, presign input uploads). IAM lets a
// producer's principal call them; which tenant's jobs it may touch is the
// API's rule: the stage config maps each principal to one tenant
// (docs/security.md).
func ProducerRoute(r api.Route) bool { return r.Auth == api.AuthProducer }

// IAMRoute reports whether API Gateway authorizes a route with IAM: the
// producer and operator routes.
func IAMRoute(r api.Route) bool { return r.Auth == api.AuthProducer || r.Auth == api.AuthOperator }

// pathParam matches a route pattern's path parameter ({job_id}).
var pathParam = regexp.MustCompile(`\{[^/}]+\}`)

// ExecuteAPIPath is a route pattern as an execute-api resource path: each
// path parameter becomes *.
func ExecuteAPIPath(pattern string) string { return pathParam.ReplaceAllString(pattern, "*") }

// clientPolicies creates the producer and operator managed policies:
// execute-api:Invoke on exactly the routes of each, from the API's route
// table, on the stage's $default stage. Attach them to the roles or users
// of the producers and operators.
func (b *build) clientPolicies(httpAPI awsapigatewayv2.HttpApi) (producer, operator awsiam.ManagedPolicy) {
	var producerARNs, operatorARNs []*string
	for _, r := range api.Routes() {
		if !IAMRoute(r) {
			continue
		}
		arn := httpAPI.ArnForExecuteApi(jsii.String(r.Method), jsii.String(ExecuteAPIPath(r.Pattern)), jsii.String("$default"))
		operatorARNs = append(operatorARNs, arn)
		if ProducerRoute(r) {
			producerARNs = append(producerARNs, arn)
		}
	}
	policy := func(id, who string, arns []*string) awsiam.ManagedPolicy {
		p := awsiam.NewManagedPolicy(b.st, jsii.String(id), &awsiam.ManagedPolicyProps{
			Description: jsii.String("fleetq " + b.stage + ": call the API's " + who + " routes"),
			Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions: jsii.Strings("execute-api:Invoke"), Resources: &arns,
			})},
		})
		suppress(p, nagRule{ID: "AwsSolutions-IAM5", Reason: "each * is a route's path parameter ({job_id}, {worker_id}, {action}) of one named route of this API's $default stage"})
		return p
	}
	producer = policy("ProducerPolicy", "producer", producerARNs)
	operator = policy("OperatorPolicy", "operator (producer and /api/admin/)", operatorARNs)
	awscdk.NewCfnOutput(b.st, jsii.String("ProducerPolicyArn"), &awscdk.CfnOutputProps{Value: producer.ManagedPolicyArn()})
	awscdk.NewCfnOutput(b.st, jsii.String("OperatorPolicyArn"), &awscdk.CfnOutputProps{Value: operator.ManagedPolicyArn()})
	return producer, operator
}
