// Package metrics writes CloudWatch metrics in the Embedded Metric Format
// (EMF): one JSON object per line on a log stream, which CloudWatch Logs
// turns into metrics. A Lambda function publishes metrics by printing such
// lines to stdout, with no PutMetricData call, no client and no latency.
package metrics
