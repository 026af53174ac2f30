// Package assets hands workers and producers short-lived presigned S3 URLs
// for job inputs and outputs, so no worker holds S3 credentials and no job
// reaches another tenant's files. Every key lives under its tenant's prefix,
// tenants/<tenant_id>/; a submission may name only keys under its own.
//
// A job names its inputs in its input document: "input_keys" maps a name
// the runner knows to an object key, and "outputs" optionally lists output
// names. At lease time the worker receives a presigned GET per input and a
// presigned PUT for its output (one per named output when it asks).
package assets
