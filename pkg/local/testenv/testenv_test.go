package testenv

import (
	"regexp"
	"testing"
)

// A table name is one DynamoDB accepts whatever the test is called:
// subtests named by fmt.Sprint of a slice carry brackets and spaces.
func TestTableNameIsOneDynamoDBAccepts(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	for _, name := range []string{"[0 2 1]", "a#b/c d", "naïve:case"} {
		t.Run(name, func(t *testing.T) {
			if got := TableName(t); !valid.MatchString(got) {
				t.Fatalf("TableName of %q = %q, which DynamoDB refuses", t.Name(), got)
			}
		})
	}
}
