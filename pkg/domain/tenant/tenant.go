package tenant

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxIDLength is the longest tenant id.
const MaxIDLength = 32

// idPattern is the one spelling of a tenant id: 1-32 lowercase ASCII
// letters, digits and inner hyphens. No case, no dots, no Unicode: two ids
// that look alike to a person are the same string or one is refused.
var idPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$`)

// IDRule says what a tenant id may look like, for error messages and docs.
const IDRule = "1-32 lowercase letters, digits and hyphens, starting and ending with a letter or digit"

// ValidID reports whether id is a canonical tenant id.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// CheckID refuses a tenant id that is not canonical, naming the field.
func CheckID(field, id string) error {
	if id == "" {
		return fmt.Errorf("field %q is required", field)
	}
	if !ValidID(id) {
		return fmt.Errorf("field %q: %q is not a tenant id: %s", field, id, IDRule)
	}
	return nil
}

// JobSeparator joins a tenant id and a job key into a job id. A tenant id
// never contains it, so the tenant of a job id is everything before the
// first one.
const JobSeparator = ":"

// MaxJobKeyLength is the longest job key a producer gives (a submission's
// job_id), and MaxJobIDLength the longest job id: the longest tenant id,
// the separator and the longest key. Every route and the dispatch function
// accept a job id up to MaxJobIDLength.
const (
	MaxJobKeyLength = 128
	MaxJobIDLength  = MaxIDLength + len(JobSeparator) + MaxJobKeyLength
)

// JobID is the id of tenant's job with the producer's key: the tenant, the
// separator and the key. A key that already begins with the tenant and the
// separator is the id itself, so resubmitting with the id an answer gave
// names the same job. The same key from two tenants gives two ids.
func JobID(tenant, key string) string {
	if strings.HasPrefix(key, tenant+JobSeparator) {
		return key
	}
	return tenant + JobSeparator + key
}

// KeyOf is the key of tenant's job id: what follows the tenant and the
// separator, or "" when the id is not scoped to that tenant. A release
// before tenant-scoped ids stored a job under the producer's key alone,
// so KeyOf is also the id such a release gave the same submission.
func KeyOf(tenant, id string) string {
	key, ok := strings.CutPrefix(id, tenant+JobSeparator)
	if !ok {
		return ""
	}
	return key
}

// OfJob is the tenant a job id names, or false when it names none.
func OfJob(id string) (string, bool) {
	t, _, ok := strings.Cut(id, JobSeparator)
	if !ok || !ValidID(t) {
		return "", false
	}
	return t, true
}
