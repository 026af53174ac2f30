// Package runtimeapi speaks the part of the AWS Lambda Runtime API that
// aws-lambda-go leaves out: reporting an error during initialization, so
// that Lambda's answer to the invocation names the reason instead of only
// Runtime.ExitError.
package runtimeapi
