package localaws

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Scaling activity status codes the fake records (the service's own
// values; it has more, e.g. PreInService, WaitingForSpotInstanceId).
const (
	ActivitySuccessful = "Successful"
	ActivityFailed     = "Failed"
	ActivityInProgress = "InProgress"
)

// NoSpotCapacityMessage is the StatusMessage of a Spot launch the service
// could not place, as Auto Scaling groups report it (seen in the
// activities quoted in aws/aws-parallelcluster#1944 and
// cortexlabs/cortex#1258).
const NoSpotCapacityMessage = "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that matches your request. Launching EC2 instance failed."

// ASGActivity is one scaling activity of a fake group.
type ASGActivity struct {
	ID            string
	Description   string
	Cause         string
	StatusCode    string // Successful, Failed, InProgress, ...
	StatusMessage string
	Start, End    time.Time
}

// SetClock makes the fake date the activities it records by now (the
// wall clock by default), so a test on a fake clock sees launch failures
// at its own times.
func (a *AutoScaling) SetClock(now func() time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = now
}

// AddActivity records an activity of a group, dated by its Start; it
// reports whether the group exists.
func (a *AutoScaling) AddActivity(group string, act ASGActivity) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[group]
	if !ok {
		return false
	}
	a.addActivity(g, act)
	return true
}

// SetCapacity switches whether a group's launches find capacity (they do
// until switched off) and makes the group launch: from then on a raised
// desired capacity and every Fill try to launch the missing instances, as
// a real group does. Without capacity each try records a Failed activity
// with NoSpotCapacityMessage; with it the instances join InService and a
// Successful activity is recorded. It reports whether the group exists.
func (a *AutoScaling) SetCapacity(group string, available bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[group]
	if !ok {
		return false
	}
	g.Launches, g.NoCapacity = true, !available
	a.fill(g)
	return true
}

// Fill is one of a launching group's periodic tries to reach its desired
// capacity (see SetCapacity); groups that do not launch are left alone.
func (a *AutoScaling) Fill(group string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g, ok := a.groups[group]; ok {
		a.fill(g)
	}
}

// Activities returns a group's activities, newest first.
func (a *AutoScaling) Activities(group string) []ASGActivity {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[group]
	if !ok {
		return nil
	}
	out := slices.Clone(g.Activities)
	slices.Reverse(out)
	return out
}

func (a *AutoScaling) clockNow() time.Time {
	if a.now != nil {
		return a.now().UTC()
	}
	return time.Now().UTC()
}

func (a *AutoScaling) addActivity(g *ASGGroup, act ASGActivity) {
	a.activitySeq++
	if act.ID == "" {
		act.ID = fmt.Sprintf("00000000-0000-4000-a000-%012d", a.activitySeq)
	}
	g.Activities = append(g.Activities, act)
	slices.SortStableFunc(g.Activities, func(x, y ASGActivity) int { return x.Start.Compare(y.Start) })
}

// fill tries to launch the instances a launching group is short of.
func (a *AutoScaling) fill(g *ASGGroup) {
	have := 0
	for _, in := range g.Instances {
		if !strings.HasPrefix(in.LifecycleState, "Terminating") {
			have++
		}
	}
	if !g.Launches || g.Desired <= have {
		return
	}
	now := a.clockNow()
	cause := fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
		now.Format(time.RFC3339), have, g.Desired)
	if g.NoCapacity {
		a.addActivity(g, ASGActivity{Description: "Launching a new EC2 instance.  Status Reason: " + NoSpotCapacityMessage,
			Cause: cause, StatusCode: ActivityFailed, StatusMessage: NoSpotCapacityMessage, Start: now, End: now})
		return
	}
	for range g.Desired - have {
		id := fromWarmPool(g)
		if id == "" {
			a.instanceSeq++
			id = fmt.Sprintf("i-%017x", a.instanceSeq)
		}
		g.Instances = append(g.Instances, ASGInstance{ID: id, LifecycleState: "InService", HealthStatus: "Healthy",
			ProtectedFromScaleIn: g.NewInstancesProtected})
		a.addActivity(g, ASGActivity{Description: "Launching a new EC2 instance: " + id, Cause: cause,
			StatusCode: ActivitySuccessful, Start: now, End: now})
	}
}

// describeActivities serves DescribeScalingActivities: a group's
// activities newest first, MaxRecords (1-100, default 100) a page.
func (a *AutoScaling) describeActivities(p url.Values) (any, *ASGError) {
	var acts []ASGActivity
	if name := p.Get("AutoScalingGroupName"); name != "" {
		if g, ok := a.groups[name]; ok {
			acts = slices.Clone(g.Activities)
		}
	} else {
		for _, n := range a.order {
			acts = append(acts, a.groups[n].Activities...)
		}
		slices.SortStableFunc(acts, func(x, y ASGActivity) int { return x.Start.Compare(y.Start) })
	}
	slices.Reverse(acts)
	if ids := memberList(p, "ActivityIds"); len(ids) > 0 {
		acts = slices.DeleteFunc(acts, func(x ASGActivity) bool { return !slices.Contains(ids, x.ID) })
	}
	start, end, next, perr := page(p, "activities-", 100, len(acts))
	if perr != nil {
		return nil, perr
	}
	res := xmlDescribeActivitiesResult{NextToken: next}
	for _, act := range acts[start:end] {
		x := xmlScalingActivity{ActivityID: act.ID, Group: groupOf(a, act.ID), Cause: act.Cause, Description: act.Description,
			Details: "{}", StatusCode: act.StatusCode, StatusMessage: act.StatusMessage,
			StartTime: act.Start.UTC().Format("2006-01-02T15:04:05.000Z")}
		if act.StatusCode == ActivitySuccessful || act.StatusCode == ActivityFailed {
			x.Progress = 100
		}
		if !act.End.IsZero() {
			x.EndTime = act.End.UTC().Format(time.RFC3339)
		}
		res.Activities = append(res.Activities, x)
	}
	return res, nil
}

func groupOf(a *AutoScaling, activityID string) string {
	for _, n := range a.order {
		for _, act := range a.groups[n].Activities {
			if act.ID == activityID {
				return n
			}
		}
	}
	return ""
}

// xmlScalingActivity is one <member> of Activities, in the element order
// of the service's DescribeScalingActivities answers.
type xmlScalingActivity struct {
	StatusCode    string `xml:"StatusCode"`
	Progress      int    `xml:"Progress"`
	ActivityID    string `xml:"ActivityId"`
	StartTime     string `xml:"StartTime"`
	Group         string `xml:"AutoScalingGroupName"`
	Cause         string `xml:"Cause"`
	Details       string `xml:"Details"`
	Description   string `xml:"Description"`
	EndTime       string `xml:"EndTime,omitempty"`
	StatusMessage string `xml:"StatusMessage,omitempty"`
}

type xmlDescribeActivitiesResult struct {
	XMLName    struct{}             `xml:"DescribeScalingActivitiesResult"`
	Activities []xmlScalingActivity `xml:"Activities>member"`
	NextToken  string               `xml:"NextToken,omitempty"`
}
