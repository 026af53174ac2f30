package fleetconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxUserTags bounds the cost-allocation tags of one fleet, the stage's and
// its own together: EC2 allows 50 tags on a resource and fleetq sets three
// (Name, fleetq:stage, fleetq:fleet) and keeps room for CloudFormation's.
const MaxUserTags = 40

// FleetTags are the cost-allocation tags a fleet's instances, volumes and
// group carry: the stage's tags, overridden key by key by the fleet's.
func (c *Config) FleetTags(f Fleet) map[string]string {
	out := maps.Clone(c.Tags)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, f.Tags)
	return out
}

// SortedTagKeys returns a tag map's keys in order, so templates are stable.
func SortedTagKeys(tags map[string]string) []string {
	return slices.Sorted(maps.Keys(tags))
}

// validateTags checks tags against EC2's rules for tag keys and values and
// keeps fleetq's own keys (Name, fleetq:*) to fleetq.
func validateTags(at string, tags map[string]string, k *checker) {
	for _, key := range SortedTagKeys(tags) {
		v := tags[key]
		field := fmt.Sprintf("%s[%q]", at, key)
		switch {
		case key == "" || utf8.RuneCountInString(key) > 128:
			k.add(field, "a tag key must have 1 to 128 characters")
		case strings.HasPrefix(strings.ToLower(key), "aws:"):
			k.add(field, "the aws: prefix is reserved by AWS")
		case key == "Name" || strings.HasPrefix(key, "fleetq:"):
			k.add(field, "fleetq sets Name and the fleetq: tags itself (its permissions depend on them)")
		}
		if utf8.RuneCountInString(v) > 256 {
			k.add(field, "a tag value must have at most 256 characters")
		}
	}
}

func (c *Config) validateTags(k *checker) {
	validateTags("tags", c.Tags, k)
	for i, f := range c.Fleets {
		at := fmt.Sprintf("fleets[%d].tags", i)
		validateTags(at, f.Tags, k)
		if n := len(c.FleetTags(f)); n > MaxUserTags {
			k.add(at, "the stage's and the fleet's tags come to %d, more than %d", n, MaxUserTags)
		}
	}
}
