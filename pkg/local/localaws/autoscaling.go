package localaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// autoScalingXMLNS is the namespace of every EC2 Auto Scaling Query API
// response (API version 2011-01-01).
const autoScalingXMLNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"

// ASGInstance is an instance in a fake Auto Scaling group.
type ASGInstance struct {
	ID                   string
	LifecycleState       string // InService, Pending, Pending:Wait, Terminating:Wait, ...
	HealthStatus         string // Healthy (default) or Unhealthy
	InstanceType         string
	AZ                   string
	ProtectedFromScaleIn bool
	// LifecycleToken is the token of the lifecycle action the instance is
	// waiting on (state Pending:Wait or Terminating:Wait), if any.
	LifecycleToken string
}

// ASGGroup is a fake Auto Scaling group.
type ASGGroup struct {
	Name                  string
	Min, Max, Desired     int
	Instances             []ASGInstance
	LifecycleHooks        []string // names CompleteLifecycleAction accepts
	NewInstancesProtected bool
	// Activities are the group's scaling activities, oldest first
	// (DescribeScalingActivities answers them newest first).
	Activities []ASGActivity
	// Launches makes the group launch the instances its desired capacity
	// asks for; NoCapacity makes those launches fail (see SetCapacity).
	Launches, NoCapacity bool
	// InstanceTypes are the instance types of the group's mixed instances
	// policy overrides, in priority order (none: no mixed instances policy).
	InstanceTypes []string
	// Subnets are the group's subnets (VPCZoneIdentifier), in order.
	Subnets []string
	// WarmPool is the group's warm pool (warmpool.go); nil: none.
	WarmPool *ASGWarmPool
}

// ASGCall is one request the fake Auto Scaling server received.
type ASGCall struct {
	Action string
	Params url.Values
}

// ASGLifecycleCompletion is one accepted CompleteLifecycleAction.
type ASGLifecycleCompletion struct {
	Group, Hook, InstanceID, Token, Result string
}

// ASGLifecycleHeartbeat is one accepted RecordLifecycleActionHeartbeat.
type ASGLifecycleHeartbeat struct {
	Group, Hook, InstanceID, Token string
}

// ASGError is an error the fake answers with, in the Query protocol's
// ErrorResponse shape.
type ASGError struct {
	Status  int    // HTTP status; 400 for Sender errors, 5xx for Receiver errors
	Code    string // e.g. Throttling, ValidationError, InternalFailure
	Message string
}

// AutoScaling is an in-process server speaking the EC2 Auto Scaling Query
// API (form-encoded POST, Action and Version=2011-01-01, XML answers) for
// the actions fleetq uses: DescribeAutoScalingGroups,
// DescribeAutoScalingInstances,
// UpdateAutoScalingGroup (the overrides' instance types and the subnets
// only), SetDesiredCapacity, TerminateInstanceInAutoScalingGroup,
// CompleteLifecycleAction, RecordLifecycleActionHeartbeat,
// DescribeScalingActivities (activities.go) and SetInstanceProtection
// (warmpool.go, with a group's warm pool). Everything else answers
// InvalidAction.
//
// It keeps groups and instances as the tests set them; it launches nothing
// unless a group is made to (SetCapacity),
// and a lifecycle action waits until it is completed (heartbeat timeouts
// are not modelled: a test ends a wait with EndLifecycleWait).
// SetDesiredCapacity changes the number only, and a terminated instance
// leaves the group at once (a real group shows it as Terminating first).
type AutoScaling struct {
	*Server

	mu          sync.Mutex
	groups      map[string]*ASGGroup
	order       []string // group names in creation order, for paging
	injected    map[string][]ASGError
	calls       []ASGCall
	completions []ASGLifecycleCompletion
	heartbeats  []ASGLifecycleHeartbeat
	requestSeq  int
	now         func() time.Time
	activitySeq int
	instanceSeq int
	// pageSize bounds the groups in one DescribeAutoScalingGroups page when
	// the request names no MaxRecords (the service's default is 50).
	pageSize int
}

// StartAutoScaling starts a fake Auto Scaling API server on addr
// ("127.0.0.1:0" or "" for any free port). Each server has its own groups.
func StartAutoScaling(addr string) (*AutoScaling, error) {
	a := &AutoScaling{groups: map[string]*ASGGroup{}, injected: map[string][]ASGError{}, pageSize: 50}
	srv, err := serve(addr, a)
	if err != nil {
		return nil, err
	}
	a.Server = srv
	return a, nil
}

// PutGroup creates or replaces a group.
func (a *AutoScaling) PutGroup(g ASGGroup) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g.Instances = slices.Clone(g.Instances)
	for i := range g.Instances {
		if g.Instances[i].HealthStatus == "" {
			g.Instances[i].HealthStatus = "Healthy"
		}
	}
	g.LifecycleHooks = slices.Clone(g.LifecycleHooks)
	g.Activities = slices.Clone(g.Activities)
	g.InstanceTypes, g.Subnets = slices.Clone(g.InstanceTypes), slices.Clone(g.Subnets)
	if g.WarmPool != nil {
		wp := *g.WarmPool
		wp.Stopped = slices.Clone(wp.Stopped)
		g.WarmPool = &wp
	}
	if _, ok := a.groups[g.Name]; !ok {
		a.order = append(a.order, g.Name)
	}
	a.groups[g.Name] = &g
}

// AddInstance adds an instance to an existing group; it reports whether the
// group exists.
func (a *AutoScaling) AddInstance(group string, in ASGInstance) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[group]
	if !ok {
		return false
	}
	if in.HealthStatus == "" {
		in.HealthStatus = "Healthy"
	}
	g.Instances = append(g.Instances, in)
	return true
}

// Group returns a copy of a group as the server holds it now.
func (a *AutoScaling) Group(name string) (ASGGroup, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[name]
	if !ok {
		return ASGGroup{}, false
	}
	c := *g
	c.Instances = slices.Clone(g.Instances)
	c.LifecycleHooks = slices.Clone(g.LifecycleHooks)
	c.Activities = slices.Clone(g.Activities)
	c.InstanceTypes, c.Subnets = slices.Clone(g.InstanceTypes), slices.Clone(g.Subnets)
	return c, true
}

// Desired returns a group's desired capacity (-1 if there is no such group).
func (a *AutoScaling) Desired(name string) int {
	g, ok := a.Group(name)
	if !ok {
		return -1
	}
	return g.Desired
}

// FailNext makes the next n requests for action ("" for any action) answer
// with e instead of being served.
func (a *AutoScaling) FailNext(action string, n int, e ASGError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range n {
		a.injected[action] = append(a.injected[action], e)
	}
}

// Throttle makes the next n requests for action ("" for any) answer as the
// service does when its request rate is exceeded.
func (a *AutoScaling) Throttle(action string, n int) {
	a.FailNext(action, n, ASGError{Status: http.StatusBadRequest, Code: "Throttling", Message: "Rate exceeded"})
}

// SetPageSize sets how many groups one DescribeAutoScalingGroups page holds
// when the request does not say.
func (a *AutoScaling) SetPageSize(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pageSize = n
}

// Calls returns every request received so far, injected failures included.
func (a *AutoScaling) Calls() []ASGCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// CallCount returns how many requests for action were received.
func (a *AutoScaling) CallCount(action string) int {
	n := 0
	for _, c := range a.Calls() {
		if c.Action == action {
			n++
		}
	}
	return n
}

// LifecycleCompletions returns the CompleteLifecycleAction calls accepted.
func (a *AutoScaling) LifecycleCompletions() []ASGLifecycleCompletion {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.completions)
}

// LifecycleHeartbeats returns the RecordLifecycleActionHeartbeat calls
// accepted.
func (a *AutoScaling) LifecycleHeartbeats() []ASGLifecycleHeartbeat {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.heartbeats)
}

// EndLifecycleWait ends an instance's lifecycle wait as the group does when
// the action's timeout passes with the hook's default result CONTINUE: a
// terminating instance leaves the group, a launching one goes in service.
// It reports whether the instance was waiting.
func (a *AutoScaling) EndLifecycleWait(instanceID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, i := a.findInstance(instanceID)
	if g == nil || !strings.HasSuffix(g.Instances[i].LifecycleState, ":Wait") {
		return false
	}
	if g.Instances[i].LifecycleState == "Pending:Wait" {
		g.Instances[i].LifecycleState, g.Instances[i].LifecycleToken = "InService", ""
	} else {
		g.Instances = slices.Delete(g.Instances, i, i+1)
	}
	return true
}

// ServeHTTP answers one Query API request.
func (a *AutoScaling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requestSeq++
	reqID := fmt.Sprintf("00000000-0000-4000-8000-%012d", a.requestSeq)

	if r.Method != http.MethodPost {
		writeASGError(w, reqID, ASGError{Status: http.StatusMethodNotAllowed, Code: "InvalidHttpRequest", Message: "only POST is served"})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeASGError(w, reqID, ASGError{Status: http.StatusBadRequest, Code: "MalformedQueryString", Message: err.Error()})
		return
	}
	p := r.PostForm
	action := p.Get("Action")
	a.calls = append(a.calls, ASGCall{Action: action, Params: p})
	if v := p.Get("Version"); v != "2011-01-01" {
		writeASGError(w, reqID, ASGError{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: fmt.Sprintf("unsupported Version %q", v)})
		return
	}
	for _, key := range []string{action, ""} {
		if q := a.injected[key]; len(q) > 0 {
			a.injected[key] = q[1:]
			writeASGError(w, reqID, q[0])
			return
		}
	}

	var (
		body any
		e    *ASGError
	)
	switch action {
	case "DescribeAutoScalingGroups":
		body, e = a.describeGroups(p)
	case "SetDesiredCapacity":
		body, e = a.setDesired(p)
	case "UpdateAutoScalingGroup":
		body, e = a.updateGroup(p)
	case "DescribeScalingActivities":
		body, e = a.describeActivities(p)
	case "DescribeAutoScalingInstances":
		body, e = a.describeInstances(p)
	case "TerminateInstanceInAutoScalingGroup":
		body, e = a.terminate(p)
	case "CompleteLifecycleAction":
		body, e = a.completeLifecycle(p)
	case "RecordLifecycleActionHeartbeat":
		body, e = a.heartbeatLifecycle(p)
	case "SetInstanceProtection":
		body, e = a.setProtection(p)
	default:
		e = &ASGError{Status: http.StatusBadRequest, Code: "InvalidAction", Message: fmt.Sprintf("The action %s is not valid for this web service.", action)}
	}
	if e != nil {
		writeASGError(w, reqID, *e)
		return
	}
	writeASGResponse(w, action, reqID, body)
}

func validation(format string, args ...any) *ASGError {
	return &ASGError{Status: http.StatusBadRequest, Code: "ValidationError", Message: fmt.Sprintf(format, args...)}
}

func required(p url.Values, names ...string) *ASGError {
	for _, n := range names {
		if p.Get(n) == "" {
			return validation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(n))
		}
	}
	return nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// memberList reads a Query-protocol list: Name.member.1, Name.member.2, ...
func memberList(p url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := p[name+".member."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

func (a *AutoScaling) describeGroups(p url.Values) (any, *ASGError) {
	names := memberList(p, "AutoScalingGroupNames")
	var match []string
	for _, n := range a.order {
		if len(names) == 0 || slices.Contains(names, n) {
			match = append(match, n)
		}
	}
	start, end, next, perr := page(p, "page-", a.pageSize, len(match))
	if perr != nil {
		return nil, perr
	}
	res := xmlDescribeGroupsResult{NextToken: next}
	for _, n := range match[start:end] {
		res.Groups = append(res.Groups, toXMLGroup(a.groups[n]))
	}
	return res, nil
}

// page reads a Describe call's MaxRecords (1-100, else size) and NextToken
// (prefix + the offset a previous page ended at) over total records, and
// answers the records to return, [start, end), and the next page's token
// ("" on the last page).
func page(p url.Values, prefix string, size, total int) (start, end int, next string, _ *ASGError) {
	if v := p.Get("MaxRecords"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return 0, 0, "", validation("MaxRecords must be between 1 and 100")
		}
		size = n
	}
	if tok := p.Get("NextToken"); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, prefix))
		if err != nil || !strings.HasPrefix(tok, prefix) || n < 0 || n > total {
			return 0, 0, "", &ASGError{Status: http.StatusBadRequest, Code: "InvalidNextToken", Message: "The token is invalid."}
		}
		start = n
	}
	end = min(start+size, total)
	if end < total {
		next = prefix + strconv.Itoa(end)
	}
	return start, end, next, nil
}

func toXMLGroup(g *ASGGroup) xmlGroup {
	x := xmlGroup{
		Name:                  g.Name,
		ARN:                   "arn:aws:autoscaling:us-east-1:000000000000:autoScalingGroup:00000000-0000-4000-8000-000000000000:autoScalingGroupName/" + g.Name,
		Min:                   g.Min,
		Max:                   g.Max,
		Desired:               g.Desired,
		DefaultCooldown:       300,
		HealthCheckType:       "EC2",
		CreatedTime:           "2026-01-01T00:00:00.000Z",
		NewInstancesProtected: g.NewInstancesProtected,
	}
	azs := map[string]bool{}
	for _, in := range g.Instances {
		x.Instances = append(x.Instances, xmlInstance{
			ID: in.ID, Type: in.InstanceType, AZ: in.AZ, State: in.LifecycleState,
			Health: in.HealthStatus, Protected: in.ProtectedFromScaleIn,
		})
		if in.AZ != "" && !azs[in.AZ] {
			azs[in.AZ] = true
			x.AZs = append(x.AZs, in.AZ)
		}
	}
	if len(x.AZs) == 0 {
		x.AZs = []string{"us-east-1a"}
	}
	x.VPCZoneIdentifier = strings.Join(g.Subnets, ",")
	if len(g.InstanceTypes) > 0 {
		mip := &xmlMixedInstancesPolicy{}
		mip.LaunchTemplate.Spec.ID, mip.LaunchTemplate.Spec.Version = "lt-00000000000000000", "1"
		for _, t := range g.InstanceTypes {
			mip.LaunchTemplate.Overrides = append(mip.LaunchTemplate.Overrides, xmlOverride{InstanceType: t})
		}
		mip.Distribution.SpotAllocationStrategy = "capacity-optimized-prioritized"
		x.MixedInstancesPolicy = mip
	}
	return x
}

// updateGroup serves UpdateAutoScalingGroup for what the scaler changes:
// the instance types of the mixed instances policy's overrides
// (MixedInstancesPolicy.LaunchTemplate.Overrides.member.N.InstanceType)
// and the subnets (VPCZoneIdentifier). Other parameters are accepted and
// ignored, as parameters left out leave the group as it is.
func (a *AutoScaling) updateGroup(p url.Values) (any, *ASGError) {
	if e := required(p, "AutoScalingGroupName"); e != nil {
		return nil, e
	}
	name := p.Get("AutoScalingGroupName")
	g, ok := a.groups[name]
	if !ok {
		return nil, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	const override = "MixedInstancesPolicy.LaunchTemplate.Overrides.member."
	var types []string
	for i := 1; ; i++ {
		_, present := p[override+strconv.Itoa(i)+".InstanceType"]
		if !present {
			break
		}
		t := p.Get(override + strconv.Itoa(i) + ".InstanceType")
		if t == "" || slices.Contains(types, t) {
			return nil, validation("Duplicate or empty instance type %q in the overrides of the mixed instances policy", t)
		}
		types = append(types, t)
	}
	if len(types) > 0 && len(g.InstanceTypes) == 0 {
		return nil, validation("The group %s has no mixed instances policy to update", name)
	}
	var subnets []string
	if _, present := p["VPCZoneIdentifier"]; present {
		for _, sn := range strings.Split(p.Get("VPCZoneIdentifier"), ",") {
			if sn = strings.TrimSpace(sn); sn != "" {
				subnets = append(subnets, sn)
			}
		}
		if len(subnets) == 0 {
			return nil, validation("VPCZoneIdentifier must name at least one subnet")
		}
	}
	if len(types) > 0 {
		g.InstanceTypes = types
	}
	if subnets != nil {
		g.Subnets = subnets
	}
	return nil, nil
}

// describeInstances serves DescribeAutoScalingInstances for the instances
// named (an instance in no group is left out of the answer, as the service
// does); without names it answers every instance, in one page.
func (a *AutoScaling) describeInstances(p url.Values) (any, *ASGError) {
	ids := memberList(p, "InstanceIds")
	if len(ids) > 50 {
		return nil, validation("The number of instance ids that may be passed in is limited to 50")
	}
	res := xmlDescribeInstancesResult{}
	for _, name := range a.order {
		g := a.groups[name]
		for _, in := range g.Instances {
			if len(ids) > 0 && !slices.Contains(ids, in.ID) {
				continue
			}
			res.Instances = append(res.Instances, xmlGroupInstance{
				ID: in.ID, Group: g.Name, Type: in.InstanceType, AZ: in.AZ, State: in.LifecycleState,
				Health: strings.ToUpper(in.HealthStatus), Protected: in.ProtectedFromScaleIn,
			})
		}
	}
	return res, nil
}

func (a *AutoScaling) setDesired(p url.Values) (any, *ASGError) {
	if e := required(p, "AutoScalingGroupName", "DesiredCapacity"); e != nil {
		return nil, e
	}
	name := p.Get("AutoScalingGroupName")
	g, ok := a.groups[name]
	if !ok {
		return nil, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	n, err := strconv.Atoi(p.Get("DesiredCapacity"))
	if err != nil {
		return nil, validation("DesiredCapacity must be an integer")
	}
	if n > g.Max {
		return nil, validation("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", n, g.Max)
	}
	if n < g.Min {
		return nil, validation("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", n, g.Min)
	}
	g.Desired = n
	a.fill(g)
	a.scaleIn(g)
	return nil, nil
}

func (a *AutoScaling) findInstance(id string) (*ASGGroup, int) {
	for _, name := range a.order {
		g := a.groups[name]
		for i, in := range g.Instances {
			if in.ID == id {
				return g, i
			}
		}
	}
	return nil, -1
}

func (a *AutoScaling) terminate(p url.Values) (any, *ASGError) {
	if e := required(p, "InstanceId", "ShouldDecrementDesiredCapacity"); e != nil {
		return nil, e
	}
	id := p.Get("InstanceId")
	decrement := p.Get("ShouldDecrementDesiredCapacity") == "true"
	g, i := a.findInstance(id)
	if g == nil {
		return nil, validation("Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	if decrement {
		if g.Desired-1 < g.Min {
			return nil, validation("Currently, desiredCapacity (%d) is at minimum (%d); cannot decrement desired capacity of the AutoScalingGroup %s.", g.Desired, g.Min, g.Name)
		}
		g.Desired--
	}
	g.Instances = slices.Delete(g.Instances, i, i+1)
	cause := "instance was taken out of service in response to a user request"
	if decrement {
		cause += ", shrinking the capacity from " + strconv.Itoa(g.Desired+1) + " to " + strconv.Itoa(g.Desired)
	}
	return xmlTerminateResult{Activity: xmlActivity{
		ActivityID:  fmt.Sprintf("00000000-0000-4000-9000-%012d", a.requestSeq),
		Group:       g.Name,
		Cause:       "At " + time.Now().UTC().Format(time.RFC3339) + " " + cause + ".",
		Description: "Terminating EC2 instance: " + id,
		Progress:    0,
		StartTime:   time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		StatusCode:  "InProgress",
	}}, nil
}

// waitingAction finds the instance of group name whose lifecycle action
// hook (as named by instance id and/or token) is waiting, with the
// service's validation errors when there is none.
func (a *AutoScaling) waitingAction(p url.Values) (*ASGGroup, int, *ASGError) {
	name, hook := p.Get("AutoScalingGroupName"), p.Get("LifecycleHookName")
	id, token := p.Get("InstanceId"), p.Get("LifecycleActionToken")
	if id == "" && token == "" {
		return nil, -1, validation("Either InstanceId or LifecycleActionToken must be specified.")
	}
	g, ok := a.groups[name]
	if !ok {
		return nil, -1, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	if !slices.Contains(g.LifecycleHooks, hook) {
		return nil, -1, validation("No Lifecycle Hook found with name %s for AutoScalingGroup %s", hook, name)
	}
	for i, in := range g.Instances {
		if (id == "" || in.ID == id) && (token == "" || in.LifecycleToken == token) && strings.HasSuffix(in.LifecycleState, ":Wait") {
			return g, i, nil
		}
	}
	if id != "" {
		return nil, -1, validation("No active Lifecycle Action found with instance ID %s", id)
	}
	return nil, -1, validation("No active Lifecycle Action found with token %s", token)
}

func (a *AutoScaling) completeLifecycle(p url.Values) (any, *ASGError) {
	if e := required(p, "AutoScalingGroupName", "LifecycleHookName", "LifecycleActionResult"); e != nil {
		return nil, e
	}
	result := p.Get("LifecycleActionResult")
	if p.Get("InstanceId") != "" || p.Get("LifecycleActionToken") != "" {
		if result != "CONTINUE" && result != "ABANDON" {
			return nil, validation("LifecycleActionResult must be CONTINUE or ABANDON")
		}
	}
	g, idx, e := a.waitingAction(p)
	if e != nil {
		return nil, e
	}
	in := &g.Instances[idx]
	a.completions = append(a.completions, ASGLifecycleCompletion{Group: g.Name, Hook: p.Get("LifecycleHookName"), InstanceID: in.ID,
		Token: p.Get("LifecycleActionToken"), Result: result})
	switch {
	case in.LifecycleState == "Pending:Wait" && result == "CONTINUE":
		in.LifecycleState, in.LifecycleToken = "InService", ""
	case in.LifecycleState == "Pending:Wait": // ABANDON: the launch is undone
		g.Instances = slices.Delete(g.Instances, idx, idx+1)
	default: // Terminating:Wait: the instance goes either way
		g.Instances = slices.Delete(g.Instances, idx, idx+1)
	}
	return xmlCompleteLifecycleResult{}, nil
}

// heartbeatLifecycle records a heartbeat of a waiting lifecycle action; the
// action keeps waiting.
func (a *AutoScaling) heartbeatLifecycle(p url.Values) (any, *ASGError) {
	if e := required(p, "AutoScalingGroupName", "LifecycleHookName"); e != nil {
		return nil, e
	}
	g, idx, e := a.waitingAction(p)
	if e != nil {
		return nil, e
	}
	a.heartbeats = append(a.heartbeats, ASGLifecycleHeartbeat{Group: g.Name, Hook: p.Get("LifecycleHookName"),
		InstanceID: g.Instances[idx].ID, Token: p.Get("LifecycleActionToken")})
	return xmlHeartbeatLifecycleResult{}, nil
}

// XML shapes of the Query protocol answers.

type xmlResponseMetadata struct {
	RequestID string `xml:"RequestId"`
}

type xmlInstance struct {
	ID        string `xml:"InstanceId"`
	Type      string `xml:"InstanceType,omitempty"`
	AZ        string `xml:"AvailabilityZone"`
	State     string `xml:"LifecycleState"`
	Health    string `xml:"HealthStatus"`
	Protected bool   `xml:"ProtectedFromScaleIn"`
}

type xmlGroup struct {
	Name                  string                   `xml:"AutoScalingGroupName"`
	ARN                   string                   `xml:"AutoScalingGroupARN"`
	Min                   int                      `xml:"MinSize"`
	Max                   int                      `xml:"MaxSize"`
	Desired               int                      `xml:"DesiredCapacity"`
	DefaultCooldown       int                      `xml:"DefaultCooldown"`
	AZs                   []string                 `xml:"AvailabilityZones>member"`
	HealthCheckType       string                   `xml:"HealthCheckType"`
	CreatedTime           string                   `xml:"CreatedTime"`
	Instances             []xmlInstance            `xml:"Instances>member"`
	NewInstancesProtected bool                     `xml:"NewInstancesProtectedFromScaleIn"`
	VPCZoneIdentifier     string                   `xml:"VPCZoneIdentifier,omitempty"`
	MixedInstancesPolicy  *xmlMixedInstancesPolicy `xml:"MixedInstancesPolicy,omitempty"`
}

type xmlOverride struct {
	InstanceType string `xml:"InstanceType"`
}

type xmlMixedInstancesPolicy struct {
	LaunchTemplate struct {
		Spec struct {
			ID      string `xml:"LaunchTemplateId"`
			Version string `xml:"Version"`
		} `xml:"LaunchTemplateSpecification"`
		Overrides []xmlOverride `xml:"Overrides>member"`
	} `xml:"LaunchTemplate"`
	Distribution struct {
		SpotAllocationStrategy string `xml:"SpotAllocationStrategy"`
	} `xml:"InstancesDistribution"`
}

// xmlResponse is <ActionResponse xmlns=...><ActionResult>...</ActionResult>
// <ResponseMetadata>...</ResponseMetadata></ActionResponse>; actions
// without output (SetDesiredCapacity) carry no Result element.
type xmlResponse struct {
	XMLName  xml.Name
	XMLNS    string              `xml:"xmlns,attr"`
	Result   any                 `xml:",omitempty"`
	Metadata xmlResponseMetadata `xml:"ResponseMetadata"`
}

type xmlDescribeGroupsResult struct {
	XMLName   xml.Name   `xml:"DescribeAutoScalingGroupsResult"`
	Groups    []xmlGroup `xml:"AutoScalingGroups>member"`
	NextToken string     `xml:"NextToken,omitempty"`
}

type xmlGroupInstance struct {
	ID        string `xml:"InstanceId"`
	Group     string `xml:"AutoScalingGroupName"`
	Type      string `xml:"InstanceType,omitempty"`
	AZ        string `xml:"AvailabilityZone"`
	State     string `xml:"LifecycleState"`
	Health    string `xml:"HealthStatus"`
	Protected bool   `xml:"ProtectedFromScaleIn"`
}

type xmlDescribeInstancesResult struct {
	XMLName   xml.Name           `xml:"DescribeAutoScalingInstancesResult"`
	Instances []xmlGroupInstance `xml:"AutoScalingInstances>member"`
}

type xmlActivity struct {
	ActivityID  string `xml:"ActivityId"`
	Group       string `xml:"AutoScalingGroupName"`
	Cause       string `xml:"Cause"`
	Description string `xml:"Description"`
	Progress    int    `xml:"Progress"`
	StartTime   string `xml:"StartTime"`
	StatusCode  string `xml:"StatusCode"`
}

type xmlTerminateResult struct {
	XMLName  xml.Name    `xml:"TerminateInstanceInAutoScalingGroupResult"`
	Activity xmlActivity `xml:"Activity"`
}

type xmlCompleteLifecycleResult struct {
	XMLName xml.Name `xml:"CompleteLifecycleActionResult"`
}

type xmlHeartbeatLifecycleResult struct {
	XMLName xml.Name `xml:"RecordLifecycleActionHeartbeatResult"`
}

func writeASGResponse(w http.ResponseWriter, action, reqID string, result any) {
	body, err := xml.Marshal(xmlResponse{
		XMLName:  xml.Name{Local: action + "Response"},
		XMLNS:    autoScalingXMLNS,
		Result:   result,
		Metadata: xmlResponseMetadata{RequestID: reqID},
	})
	if err != nil {
		writeASGError(w, reqID, ASGError{Status: http.StatusInternalServerError, Code: "InternalFailure", Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", reqID)
	_, _ = w.Write([]byte(xml.Header + string(body)))
}

type xmlErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	XMLNS   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

func writeASGError(w http.ResponseWriter, reqID string, e ASGError) {
	writeQueryError(w, autoScalingXMLNS, reqID, queryError{e.Status, e.Code, e.Message})
}
