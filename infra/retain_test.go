package infra_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// statefulTypes are the resources that hold data a stage keeps: the table,
// the buckets, the secrets and the log groups.
var statefulTypes = []string{"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SecretsManager::Secret", "AWS::Logs::LogGroup"}

// fixedNames are the properties that give a resource a physical name of
// the stack's choosing: a second resource of that name cannot be created
// while the first exists.
var fixedNames = []string{"TableName", "BucketName", "LogGroupName", "Name", "QueueName"}

// A failed first deploy of any shipped stage can be deployed again: its
// rollback deletes what it created (RetainExceptOnCreate), the table
// included, which it could not do with deletion protection on; once
// created, a stage other than dev keeps its table, assets bucket, secrets
// and logs through stack deletion and replacement. Nothing that a rollback
// leaves behind (plain Retain) has a fixed name a retry would collide with.
func TestStatefulResourcesSurviveARetriedFirstDeploy(t *testing.T) {
	files, err := filepath.Glob("../config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped configs: %v", err)
	}
	for _, f := range files {
		stage := strings.TrimSuffix(filepath.Base(f), ".yaml")
		s := synth(t, stage)
		seen := map[string]int{}
		for id, r := range s.json["Resources"].(map[string]any) {
			res := r.(map[string]any)
			typ, _ := res["Type"].(string)
			deletion, _ := res["DeletionPolicy"].(string)
			replace, _ := res["UpdateReplacePolicy"].(string)
			props, _ := res["Properties"].(map[string]any)
			if deletion == "Retain" {
				for _, p := range fixedNames {
					if _, ok := props[p]; ok {
						t.Errorf("%s: %s (%s) is retained when a failed create rolls back and has a fixed %s: the retry would fail with \"already exists\"", stage, id, typ, p)
					}
				}
			}
			if !slices.Contains(statefulTypes, typ) {
				continue
			}
			seen[typ]++
			want, wantReplace := "RetainExceptOnCreate", "Retain"
			switch {
			case stage == "dev":
				want, wantReplace = "Delete", "Delete"
			case typ == "AWS::S3::Bucket" && strings.HasPrefix(id, "Logs"):
				// AWS delivers flow logs and access logs into it from the
				// start; a rollback could not delete it once it holds any,
				// and would fail. It has no fixed name: a retry makes another.
				want = "Retain"
			}
			if deletion != want || replace != wantReplace {
				t.Errorf("%s: %s (%s) has DeletionPolicy %q and UpdateReplacePolicy %q, want %q and %q", stage, id, typ, deletion, replace, want, wantReplace)
			}
			if typ == "AWS::DynamoDB::Table" && props["DeletionProtectionEnabled"] == true {
				t.Errorf("%s: the table has deletion protection: a failed first deploy's rollback could not delete it, and the retry would find its name taken", stage)
			}
		}
		for _, typ := range statefulTypes {
			if seen[typ] == 0 {
				t.Errorf("%s: no %s in the template: the test no longer sees what it checks", stage, typ)
			}
		}
	}
}
