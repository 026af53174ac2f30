package asg_test

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func TestLaunchFailedForCapacity(t *testing.T) {
	for msg, want := range map[string]bool{
		localaws.NoSpotCapacityMessage: true,
		"There is no Spot capacity available that matches your request. Launching EC2 instance failed.":                                                                                                   true,
		"We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested (us-east-1a). Our system will be working on provisioning additional capacity.":                     true,
		"Could not launch Spot Instances. UnfulfillableCapacity - Unable to fulfill capacity due to your request configuration. Please adjust your request and try again. Launching EC2 instance failed.": true,
		"Max spot instance count exceeded. Launching EC2 instance failed.":                                                                                                                                true,
		"The image id '[ami-4edb0327]' does not exist. Launching EC2 instance failed.":                                                                                                                    false,
		"You are not authorized to use launch template: lt-0123. Launching EC2 instance failed.":                                                                                                          false,
		"": false,
	} {
		if got := asg.LaunchFailedForCapacity(msg); got != want {
			t.Errorf("LaunchFailedForCapacity(%q) = %v, want %v", msg, got, want)
		}
	}
}

// ShortSince reads the group's activities through the real SDK client and
// the fake's DescribeScalingActivities: the first failure of the current
// run of capacity failures, ended by a successful launch.
func TestShortSince(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	failed := func(m int) localaws.ASGActivity {
		return localaws.ASGActivity{Description: "Launching a new EC2 instance.  Status Reason: " + localaws.NoSpotCapacityMessage,
			StatusCode: localaws.ActivityFailed, StatusMessage: localaws.NoSpotCapacityMessage, Start: at(m), End: at(m)}
	}
	launched := func(m int) localaws.ASGActivity {
		return localaws.ASGActivity{Description: "Launching a new EC2 instance: i-0abc", StatusCode: localaws.ActivitySuccessful, Start: at(m), End: at(m)}
	}
	badImage := func(m int) localaws.ASGActivity {
		return localaws.ASGActivity{Description: "Launching a new EC2 instance.  Status Reason: The image id does not exist. Launching EC2 instance failed.",
			StatusCode: localaws.ActivityFailed, StatusMessage: "The image id '[ami-4edb0327]' does not exist. Launching EC2 instance failed.", Start: at(m)}
	}
	terminated := func(m int) localaws.ASGActivity {
		return localaws.ASGActivity{Description: "Terminating EC2 instance: i-0def", StatusCode: localaws.ActivitySuccessful, Start: at(m)}
	}
	cases := map[string]struct {
		acts []localaws.ASGActivity
		want time.Time
	}{
		"no activities":                   {nil, time.Time{}},
		"launches succeed":                {[]localaws.ASGActivity{launched(1), launched(2)}, time.Time{}},
		"a run of failures":               {[]localaws.ASGActivity{failed(3), failed(5), failed(9)}, at(3)},
		"a success ends the earlier run":  {[]localaws.ASGActivity{failed(1), failed(2), launched(4), failed(6), failed(8)}, at(6)},
		"recovered":                       {[]localaws.ASGActivity{failed(1), failed(2), launched(4)}, time.Time{}},
		"terminations do not end the run": {[]localaws.ASGActivity{failed(1), terminated(2), failed(3)}, at(1)},
		"other failures are not shortage": {[]localaws.ASGActivity{badImage(1), badImage(2)}, time.Time{}},
		"other failures inside a run":     {[]localaws.ASGActivity{failed(1), badImage(2), failed(3)}, at(1)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, asg.Options{})
			h.fake.PutGroup(localaws.ASGGroup{Name: "g", Max: 5})
			for _, a := range c.acts {
				h.fake.AddActivity("g", a)
			}
			got, err := h.ad.ShortSince(t.Context(), "g")
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(c.want) {
				t.Fatalf("ShortSince = %v, want %v", got, c.want)
			}
		})
	}
}

// A long run of failures spans pages.
func TestShortSinceFollowsPages(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(localaws.ASGGroup{Name: "g", Max: 5})
	h.fake.AddActivity("g", localaws.ASGActivity{Description: "Launching a new EC2 instance: i-1", StatusCode: localaws.ActivitySuccessful, Start: t0})
	for m := 1; m <= 150; m++ {
		h.fake.AddActivity("g", localaws.ASGActivity{Description: "Launching a new EC2 instance.  Status Reason: no capacity",
			StatusCode: localaws.ActivityFailed, StatusMessage: localaws.NoSpotCapacityMessage, Start: t0.Add(time.Duration(m) * time.Minute)})
	}
	got, err := h.ad.ShortSince(t.Context(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("ShortSince = %v, want %v", got, want)
	}
	// Two pages, each asked for once. A page may be asked for again: now and
	// then the SDK's HTTP transport closes the connection whose answer it is
	// still reading (aws/aws-sdk-go-v2#2737, "use of closed network
	// connection" on a 200), and the adapter retries a broken connection.
	pages := map[string]bool{}
	for _, c := range h.fake.Calls() {
		if c.Action == "DescribeScalingActivities" {
			pages[c.Params.Get("NextToken")] = true
		}
	}
	if len(pages) != 2 {
		t.Fatalf("%d distinct pages asked for (%v), want 2", len(pages), pages)
	}
}
