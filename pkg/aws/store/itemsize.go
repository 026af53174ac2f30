package store

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// tooLarge reports whether a transaction member was canceled for its item's
// size: DynamoDB gives it the ValidationError reason with "Item size ... has
// exceeded the maximum allowed size".
func tooLarge(r types.CancellationReason) bool {
	return aws.ToString(r.Code) == "ValidationError" && strings.Contains(aws.ToString(r.Message), "exceeded the maximum allowed size")
}

// itemTooLargeErr reports whether a single-item write was refused for its
// item's size (ValidationException, same wording).
func itemTooLargeErr(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && strings.Contains(ae.ErrorMessage(), "exceeded the maximum allowed size")
}
