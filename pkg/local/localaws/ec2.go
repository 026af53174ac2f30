package localaws

import (
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The states of an EC2 instance, as the EC2 API names them.
const (
	EC2Pending      = "pending"
	EC2Running      = "running"
	EC2Stopping     = "stopping"
	EC2Stopped      = "stopped"
	EC2ShuttingDown = "shutting-down"
	EC2Terminated   = "terminated"
)

// ec2StateCode is each state's code (the low byte of instanceState.code).
var ec2StateCode = map[string]int{EC2Pending: 0, EC2Running: 16, EC2ShuttingDown: 32, EC2Terminated: 48, EC2Stopping: 64, EC2Stopped: 80}

// The state reasons EC2 gives a stopped or terminated instance.
const (
	// ReasonUserShutdown: StopInstances or TerminateInstances.
	ReasonUserShutdown = "Client.UserInitiatedShutdown"
	// ReasonSpotShutdown: EC2 stopped a Spot instance on interruption.
	ReasonSpotShutdown = "Server.SpotInstanceShutdown"
)

// userShutdown is the state reason's message of a stop or end asked for.
const userShutdown = "Client.UserInitiatedShutdown: User initiated shutdown"

// MinBilledRun is the least a start of an instance bills: each run is
// billed by the second, with a one-minute minimum.
const MinBilledRun = time.Minute

// EC2Timing is how long the embedded EC2's transitional states last.
type EC2Timing struct {
	// Pending is from launch or start to running.
	Pending time.Duration
	// Stopping is from stop (or interruption) to stopped.
	Stopping time.Duration
	// ShuttingDown is from terminate to terminated.
	ShuttingDown time.Duration
}

// DefaultEC2Timing is the timing of a new Account: pending about as long as
// the published pending-to-running of an m7i start (16.4 s).
var DefaultEC2Timing = EC2Timing{Pending: 16 * time.Second, Stopping: 10 * time.Second, ShuttingDown: 10 * time.Second}

// LaunchTemplate is a launch template RunInstances may name.
type LaunchTemplate struct {
	ID, Name string
	// ImageID and InstanceType are what the template's version gives an
	// instance when RunInstances does not.
	ImageID, InstanceType string
}

// EC2Instance is an instance of the embedded EC2, as Instance and
// Instances answer it.
type EC2Instance struct {
	ID, ImageID, InstanceType, Zone string
	// State is one of EC2Pending ... EC2Terminated.
	State string
	// StateReason is the code of why the instance stopped or ended
	// (ReasonUserShutdown, ReasonSpotShutdown), empty while it runs.
	StateReason string
	// LaunchTemplateID is the template it was launched from, if any.
	LaunchTemplateID string
	// LaunchTemplateVersion is the version RunInstances named ("$Latest"
	// when none).
	LaunchTemplateVersion string
	// VolumeGB is its root volume's size (BlockDeviceMapping's VolumeSize;
	// 8 when none is given).
	VolumeGB int
	Tags     map[string]string
	// SpotRequestID is the Spot request that launched it; empty for an
	// On-Demand instance.
	SpotRequestID string
	LaunchTime    time.Time
	// Runs is how many times it entered running, the launch included.
	Runs int
	// Billed is the instance time billed so far: each run by the second
	// from running to stopping, at least MinBilledRun; a run still going
	// counts as if it stopped now.
	Billed time.Duration
	// StoppedByEC2 is set while EC2 holds the instance stopped after an
	// interruption: only EC2 starts it again (Account.ResumeInterrupted).
	StoppedByEC2 bool
}

// SpotRequest is a Spot instance request of the embedded EC2.
type SpotRequest struct {
	ID string
	// Type is persistent or one-time.
	Type string
	// InterruptionBehavior is stop, hibernate or terminate.
	InterruptionBehavior string
	// State is open, active, disabled, cancelled or closed.
	State string
	// Status is the request's status code (fulfilled,
	// instance-stopped-no-capacity, request-canceled-and-instance-running, ...).
	Status     string
	InstanceID string
	Zone       string
	Created    time.Time
}

type ec2Instance struct {
	EC2Instance
	// until is when the state pending, stopping or shutting-down ends.
	until time.Time
	// runningSince is when the current run began (state running).
	runningSince time.Time
	billed       time.Duration
	reasonMsg    string
	transition   string
	reservation  string
	spec         runSpec
}

// runSpec is what a persistent request relaunches an instance from.
type runSpec struct {
	image, instanceType, zone, template, version string
	volumeGB                                     int
	tags                                         map[string]string
}

type ec2Pair struct{ instanceType, zone string }

// ec2World is the embedded EC2's state, guarded by Account.mu.
type ec2World struct {
	instances map[string]*ec2Instance
	order     []string
	requests  map[string]*SpotRequest
	reqOrder  []string
	templates map[string]LaunchTemplate // by id and by name
	tokens    map[string][]string       // ClientToken: the instances it launched
	timing    EC2Timing
	failRate  map[ec2Pair]float64
	rng       *rand.Rand
	seq       int
	now       func() time.Time
}

func newEC2World() ec2World {
	return ec2World{instances: map[string]*ec2Instance{}, requests: map[string]*SpotRequest{}, templates: map[string]LaunchTemplate{},
		tokens: map[string][]string{}, timing: DefaultEC2Timing, failRate: map[ec2Pair]float64{}, rng: rand.New(rand.NewPCG(1, 1)),
		now: func() time.Time { return time.Now().UTC() }}
}

// SetClock makes the embedded EC2 read the time from now: its states
// change and its runs are billed on that clock.
func (a *Account) SetClock(now func() time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ec2.now = now
}

// SetEC2Timing sets how long the transitional states last.
func (a *Account) SetEC2Timing(t EC2Timing) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ec2.timing = t
}

// PutLaunchTemplate makes a launch template known to RunInstances.
func (a *Account) PutLaunchTemplate(t LaunchTemplate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ec2.templates[t.ID] = t
	if t.Name != "" {
		a.ec2.templates["name:"+t.Name] = t
	}
}

// SetStartFailures makes StartInstances of a stopped instance of the
// instance type in the zone fail with InsufficientInstanceCapacity at rate
// (0: never, 1: always), drawn from a generator seeded with seed (each
// call reseeds the one generator all pairs draw from), so that the same
// calls fail on every run.
func (a *Account) SetStartFailures(instanceType, zone string, rate float64, seed uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ec2.failRate[ec2Pair{instanceType, zone}] = rate
	a.ec2.rng = rand.New(rand.NewPCG(seed, seed))
}

// Interrupt is a Spot interruption whose request's behaviour is stop: EC2
// stops the instance (state reason Server.SpotInstanceShutdown) and
// disables its request; StartInstances on it is refused until EC2 starts
// it again (ResumeInterrupted). It reports whether the instance was a
// running Spot instance that stops on interruption.
func (a *Account) Interrupt(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &a.ec2
	now := w.now()
	w.settle(now)
	in, ok := w.instances[id]
	if !ok || in.State != EC2Running || in.SpotRequestID == "" {
		return false
	}
	req := w.requests[in.SpotRequestID]
	if req.InterruptionBehavior != "stop" {
		return false
	}
	w.stop(in, now, ReasonSpotShutdown, "Server.SpotInstanceShutdown: The instance was stopped because the Spot capacity it ran on was reclaimed.")
	in.StoppedByEC2 = true
	req.State, req.Status = "disabled", "instance-stopped-no-capacity"
	return true
}

// ResumeInterrupted is EC2 starting an instance it stopped on interruption,
// once capacity is back; it reports whether the instance was one.
func (a *Account) ResumeInterrupted(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &a.ec2
	now := w.now()
	w.settle(now)
	in, ok := w.instances[id]
	if !ok || !in.StoppedByEC2 || in.State != EC2Stopped {
		return false
	}
	in.StoppedByEC2 = false
	w.start(in, now)
	if req := w.requests[in.SpotRequestID]; req != nil && req.State == "disabled" {
		req.State, req.Status = "active", "fulfilled"
	}
	return true
}

// Instance answers an instance of the embedded EC2 as it is now.
func (a *Account) Instance(id string) (EC2Instance, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.ec2.now()
	a.ec2.settle(now)
	in, ok := a.ec2.instances[id]
	if !ok {
		return EC2Instance{}, false
	}
	return in.snapshot(now), true
}

// Instances answers every instance of the embedded EC2, terminated ones
// included, in launch order.
func (a *Account) Instances() []EC2Instance {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.ec2.now()
	a.ec2.settle(now)
	out := make([]EC2Instance, 0, len(a.ec2.order))
	for _, id := range a.ec2.order {
		out = append(out, a.ec2.instances[id].snapshot(now))
	}
	return out
}

// SpotRequest answers a Spot request of the embedded EC2.
func (a *Account) SpotRequest(id string) (SpotRequest, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ec2.settle(a.ec2.now())
	r, ok := a.ec2.requests[id]
	if !ok {
		return SpotRequest{}, false
	}
	return *r, true
}

func (in *ec2Instance) snapshot(now time.Time) EC2Instance {
	out := in.EC2Instance
	out.Tags = make(map[string]string, len(in.Tags))
	for k, v := range in.Tags {
		out.Tags[k] = v
	}
	out.Billed = in.billed
	if in.State == EC2Running {
		out.Billed += max(MinBilledRun, now.Sub(in.runningSince))
	}
	return out
}

// settle moves every instance whose transitional state is over on.
func (w *ec2World) settle(now time.Time) {
	for _, id := range w.order {
		in := w.instances[id]
		if in.until.IsZero() || now.Before(in.until) {
			continue
		}
		switch in.State {
		case EC2Pending:
			in.State, in.runningSince = EC2Running, in.until
			in.Runs++
		case EC2Stopping:
			in.State = EC2Stopped
		case EC2ShuttingDown:
			in.State = EC2Terminated
		}
		in.until = time.Time{}
	}
}

// endRun bills the run that ends at now, if one is going.
func (in *ec2Instance) endRun(now time.Time) {
	if in.State == EC2Running {
		in.billed += max(MinBilledRun, now.Sub(in.runningSince))
	}
}

func (w *ec2World) stop(in *ec2Instance, now time.Time, reason, msg string) {
	in.shutDown(now, EC2Stopping, now.Add(w.timing.Stopping), reason, msg)
}

// shutDown ends the instance's run and puts it in state (stopping or
// shutting-down) until then, for the reason given.
func (in *ec2Instance) shutDown(now time.Time, state string, until time.Time, reason, msg string) {
	in.endRun(now)
	in.State, in.until = state, until
	in.StateReason, in.reasonMsg = reason, msg
	who := "User"
	if reason == ReasonSpotShutdown {
		who = "Service"
	}
	in.transition = who + " initiated (" + now.UTC().Format("2006-01-02 15:04:05 MST") + ")"
}

func (w *ec2World) start(in *ec2Instance, now time.Time) {
	in.State, in.until = EC2Pending, now.Add(w.timing.Pending)
	in.StateReason, in.reasonMsg, in.transition = "", "", ""
}

// ec2Actions are the instance actions of the EC2 Query API the Account
// serves (API version 2016-11-15).
var ec2Actions = map[string]func(*ec2World, url.Values) (any, *queryError){
	"RunInstances":                 (*ec2World).runInstances,
	"StartInstances":               (*ec2World).startInstances,
	"StopInstances":                (*ec2World).stopInstances,
	"TerminateInstances":           (*ec2World).terminateInstances,
	"CancelSpotInstanceRequests":   (*ec2World).cancelSpotRequests,
	"DescribeInstances":            (*ec2World).describeInstances,
	"DescribeSpotInstanceRequests": (*ec2World).describeSpotRequests,
	"CreateTags":                   (*ec2World).createTags,
}

func ec2Invalid(code, format string, args ...any) *queryError {
	return &queryError{http.StatusBadRequest, code, fmt.Sprintf(format, args...)}
}

// ec2Tags reads Prefix.N.Key and Prefix.N.Value.
func ec2Tags(p url.Values, prefix string) (map[string]string, *queryError) {
	tags := map[string]string{}
	for i := 1; ; i++ {
		k, ok := p[fmt.Sprintf("%s.%d.Key", prefix, i)]
		if !ok {
			return tags, nil
		}
		if k[0] == "" || strings.HasPrefix(k[0], "aws:") || len(k[0]) > 128 {
			return nil, ec2Invalid("InvalidParameterValue", "Tag key %q is not allowed: empty, longer than 128 characters or starting with aws:", k[0])
		}
		tags[k[0]] = p.Get(fmt.Sprintf("%s.%d.Value", prefix, i))
	}
}

// maxLaunch bounds the instances one RunInstances launches here.
const maxLaunch = 100

var zoneName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d[a-z]$`)

func (w *ec2World) runInstances(p url.Values) (any, *queryError) {
	now := w.now()
	w.settle(now)
	if tok := p.Get("ClientToken"); tok != "" {
		if ids, ok := w.tokens[tok]; ok {
			return w.reservation(ids, now), nil
		}
	}
	minCount, err1 := strconv.Atoi(p.Get("MinCount"))
	maxCount, err2 := strconv.Atoi(p.Get("MaxCount"))
	if err1 != nil || err2 != nil {
		return nil, ec2Invalid("MissingParameter", "The request must contain the parameters MinCount and MaxCount")
	}
	if minCount < 1 || maxCount < minCount {
		return nil, ec2Invalid("InvalidParameterValue", "MinCount (%d) must be at least 1 and at most MaxCount (%d)", minCount, maxCount)
	}
	if maxCount > maxLaunch {
		return nil, ec2Invalid("InstanceLimitExceeded", "You have requested more instances (%d) than your current instance limit of %d allows.", maxCount, maxLaunch)
	}
	spec := runSpec{image: p.Get("ImageId"), instanceType: p.Get("InstanceType"), zone: p.Get("Placement.AvailabilityZone"), volumeGB: 8}
	if id, name := p.Get("LaunchTemplate.LaunchTemplateId"), p.Get("LaunchTemplate.LaunchTemplateName"); id != "" || name != "" {
		t, ok := w.templates[id]
		if id == "" {
			t, ok = w.templates["name:"+name]
		}
		if !ok {
			if id != "" {
				return nil, ec2Invalid("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
			}
			return nil, ec2Invalid("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
		spec.template, spec.version = t.ID, p.Get("LaunchTemplate.Version")
		if spec.version == "" {
			spec.version = "$Default"
		}
		if spec.image == "" {
			spec.image = t.ImageID
		}
		if spec.instanceType == "" {
			spec.instanceType = t.InstanceType
		}
	}
	if spec.image == "" {
		return nil, ec2Invalid("MissingParameter", "The request must contain the parameter ImageId")
	}
	if spec.instanceType == "" {
		spec.instanceType = "m1.small" // EC2's default instance type
	}
	if spec.zone == "" {
		spec.zone = "us-east-1a"
	} else if !zoneName.MatchString(spec.zone) {
		return nil, ec2Invalid("InvalidParameterValue", "Invalid availability zone: [%s]", spec.zone)
	}
	for i := 1; ; i++ {
		key := fmt.Sprintf("BlockDeviceMapping.%d.", i)
		if _, ok := p[key+"DeviceName"]; !ok {
			break
		}
		if v := p.Get(key + "Ebs.VolumeSize"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 16384 {
				return nil, ec2Invalid("InvalidParameterValue", "Volume of size %s is not valid: between 1 and 16384 GiB", v)
			}
			spec.volumeGB = n
		}
	}
	instanceTags := map[string]string{}
	for i := 1; ; i++ {
		key := fmt.Sprintf("TagSpecification.%d.", i)
		rt, ok := p[key+"ResourceType"]
		if !ok {
			break
		}
		tags, qe := ec2Tags(p, key+"Tag")
		if qe != nil {
			return nil, qe
		}
		switch rt[0] {
		case "instance":
			instanceTags = tags
		case "spot-instances-request", "volume", "network-interface": // not answered by this server
		default:
			return nil, ec2Invalid("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt[0])
		}
	}
	spec.tags = instanceTags
	var spotType, behavior string
	switch market := p.Get("InstanceMarketOptions.MarketType"); market {
	case "":
	case "spot":
		spotType = p.Get("InstanceMarketOptions.SpotOptions.SpotInstanceType")
		behavior = p.Get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior")
		if spotType == "" {
			spotType = "one-time"
		}
		if behavior == "" {
			behavior = "terminate"
		}
		if spotType != "one-time" && spotType != "persistent" {
			return nil, ec2Invalid("InvalidParameterValue", "Value (%s) for parameter SpotInstanceType is invalid.", spotType)
		}
		if behavior != "terminate" && behavior != "stop" && behavior != "hibernate" {
			return nil, ec2Invalid("InvalidParameterValue", "Value (%s) for parameter InstanceInterruptionBehavior is invalid.", behavior)
		}
		// RunInstances takes a persistent request only with the stop or
		// hibernate behaviour, and a one-time request only with terminate.
		if spotType == "one-time" && behavior != "terminate" {
			return nil, ec2Invalid("InvalidParameterCombination", "Interruption behavior %s is not supported for one-time Spot Instance requests; use a persistent request.", behavior)
		}
		if spotType == "persistent" && behavior == "terminate" {
			return nil, ec2Invalid("InvalidParameterCombination", "Persistent Spot Instance requests launched by RunInstances must have the interruption behavior stop or hibernate.")
		}
	default:
		return nil, ec2Invalid("InvalidParameterValue", "Value (%s) for parameter MarketType is invalid.", market)
	}
	var ids []string
	for range maxCount {
		in := w.launch(spec, now)
		if spotType != "" {
			w.seq++
			req := &SpotRequest{ID: fmt.Sprintf("sir-%08x", w.seq), Type: spotType, InterruptionBehavior: behavior, State: "active",
				Status: "fulfilled", InstanceID: in.ID, Zone: spec.zone, Created: now}
			w.requests[req.ID] = req
			w.reqOrder = append(w.reqOrder, req.ID)
			in.SpotRequestID = req.ID
		}
		ids = append(ids, in.ID)
	}
	if tok := p.Get("ClientToken"); tok != "" {
		w.tokens[tok] = ids
	}
	return w.reservation(ids, now), nil
}

func (w *ec2World) launch(spec runSpec, now time.Time) *ec2Instance {
	w.seq++
	in := &ec2Instance{EC2Instance: EC2Instance{ID: fmt.Sprintf("i-%017x", w.seq), ImageID: spec.image, InstanceType: spec.instanceType,
		Zone: spec.zone, LaunchTemplateID: spec.template, LaunchTemplateVersion: spec.version, VolumeGB: spec.volumeGB,
		Tags: map[string]string{}, LaunchTime: now}, reservation: fmt.Sprintf("r-%017x", w.seq), spec: spec}
	for k, v := range spec.tags {
		in.Tags[k] = v
	}
	if spec.template != "" {
		// EC2 tags an instance with the template it was launched from.
		version := spec.version
		if _, err := strconv.Atoi(version); err != nil {
			version = "1" // $Latest and $Default: the one version a template has here
		}
		in.Tags["aws:ec2launchtemplate:id"], in.Tags["aws:ec2launchtemplate:version"] = spec.template, version
	}
	w.start(in, now)
	w.instances[in.ID] = in
	w.order = append(w.order, in.ID)
	return in
}

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlEC2Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlBlockDevice struct {
	DeviceName string `xml:"deviceName"`
	VolumeID   string `xml:"ebs>volumeId"`
	Status     string `xml:"ebs>status"`
	Delete     bool   `xml:"ebs>deleteOnTermination"`
}

// xmlEC2Instance is one item of instancesSet, in the Instance shape of
// the EC2 API reference (API version 2016-11-15).
type xmlEC2Instance struct {
	ID             string           `xml:"instanceId"`
	ImageID        string           `xml:"imageId"`
	State          xmlInstanceState `xml:"instanceState"`
	Reason         string           `xml:"reason"`
	InstanceType   string           `xml:"instanceType"`
	LaunchTime     string           `xml:"launchTime"`
	Zone           string           `xml:"placement>availabilityZone"`
	Lifecycle      string           `xml:"instanceLifecycle,omitempty"`
	SpotRequestID  string           `xml:"spotInstanceRequestId,omitempty"`
	StateReason    *xmlStateReason  `xml:"stateReason,omitempty"`
	RootDeviceType string           `xml:"rootDeviceType"`
	RootDeviceName string           `xml:"rootDeviceName"`
	BlockDevices   []xmlBlockDevice `xml:"blockDeviceMapping>item"`
	Tags           []xmlEC2Tag      `xml:"tagSet>item"`
}

func (in *ec2Instance) xml() xmlEC2Instance {
	x := xmlEC2Instance{ID: in.ID, ImageID: in.ImageID, State: xmlInstanceState{ec2StateCode[in.State], in.State}, Reason: in.transition,
		InstanceType: in.InstanceType, LaunchTime: in.LaunchTime.UTC().Format("2006-01-02T15:04:05.000Z"), Zone: in.Zone,
		SpotRequestID: in.SpotRequestID, RootDeviceType: "ebs", RootDeviceName: "/dev/xvda",
		BlockDevices: []xmlBlockDevice{{DeviceName: "/dev/xvda", VolumeID: "vol-" + strings.TrimPrefix(in.ID, "i-"), Status: "attached", Delete: true}}}
	if in.SpotRequestID != "" {
		x.Lifecycle = "spot"
	}
	if in.StateReason != "" {
		x.StateReason = &xmlStateReason{in.StateReason, in.reasonMsg}
	}
	keys := make([]string, 0, len(in.Tags))
	for k := range in.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		x.Tags = append(x.Tags, xmlEC2Tag{k, in.Tags[k]})
	}
	return x
}

func (w *ec2World) reservation(ids []string, now time.Time) any {
	out := struct {
		XMLName   xml.Name         `xml:"RunInstancesResponse"`
		XMLNS     string           `xml:"xmlns,attr"`
		ID        string           `xml:"reservationId"`
		Owner     string           `xml:"ownerId"`
		Instances []xmlEC2Instance `xml:"instancesSet>item"`
	}{XMLNS: ec2XMLNS, Owner: localAccountID}
	for _, id := range ids {
		in := w.instances[id]
		out.ID = in.reservation
		out.Instances = append(out.Instances, in.xml())
	}
	return out
}

// localAccountID is the owner of everything the embedded EC2 holds.
const localAccountID = "000000000000"

// settledInstances settles every instance at the time now and answers
// the instances InstanceId.N names.
func (w *ec2World) settledInstances(p url.Values) (time.Time, []*ec2Instance, *queryError) {
	now := w.now()
	w.settle(now)
	ins, qe := w.instancesOf(p)
	return now, ins, qe
}

// instancesOf reads InstanceId.N and finds each, answering EC2's error for
// a malformed or unknown id.
func (w *ec2World) instancesOf(p url.Values) ([]*ec2Instance, *queryError) {
	ids := ec2List(p, "InstanceId")
	if len(ids) == 0 {
		return nil, ec2Invalid("MissingParameter", "The request must contain the parameter InstanceId")
	}
	var out []*ec2Instance
	var missing []string
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return nil, ec2Invalid("InvalidInstanceID.Malformed", "Invalid id: %q (expecting \"i-...\")", id)
		}
		in, ok := w.instances[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		out = append(out, in)
	}
	if len(missing) > 0 {
		return nil, ec2Invalid("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
	return out, nil
}

type xmlStateChange struct {
	ID       string           `xml:"instanceId"`
	Current  xmlInstanceState `xml:"currentState"`
	Previous xmlInstanceState `xml:"previousState"`
}

func stateChanges(action string, ins []*ec2Instance, previous []string) any {
	out := struct {
		XMLName xml.Name
		XMLNS   string           `xml:"xmlns,attr"`
		Changes []xmlStateChange `xml:"instancesSet>item"`
	}{XMLName: xml.Name{Local: action + "Response"}, XMLNS: ec2XMLNS}
	for i, in := range ins {
		out.Changes = append(out.Changes, xmlStateChange{in.ID, xmlInstanceState{ec2StateCode[in.State], in.State},
			xmlInstanceState{ec2StateCode[previous[i]], previous[i]}})
	}
	return out
}

func previousStates(ins []*ec2Instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.State
	}
	return out
}

// startInstances starts stopped instances. It refuses them all if one
// cannot be started: one EC2 stopped on interruption (only EC2 starts it),
// one stopping or ended, or one whose type has no Spot capacity in its
// zone now (InsufficientInstanceCapacity, a server error: the instance
// stays stopped).
func (w *ec2World) startInstances(p url.Values) (any, *queryError) {
	now, ins, qe := w.settledInstances(p)
	if qe != nil {
		return nil, qe
	}
	for _, in := range ins {
		switch {
		case in.StoppedByEC2:
			return nil, ec2Invalid("IncorrectSpotRequestState", "The Spot Instance request %s of instance %s is disabled: EC2 stopped the instance on an interruption and starts it again when capacity is available.", in.SpotRequestID, in.ID)
		case in.State == EC2Stopping || in.State == EC2ShuttingDown || in.State == EC2Terminated:
			return nil, ec2Invalid("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be started.", in.ID)
		}
	}
	for _, in := range ins {
		if in.State != EC2Stopped {
			continue
		}
		if rate := w.failRate[ec2Pair{in.InstanceType, in.Zone}]; rate > 0 && w.rng.Float64() < rate {
			return nil, &queryError{http.StatusInternalServerError, "InsufficientInstanceCapacity",
				fmt.Sprintf("There is no %s Spot capacity in the Availability Zone %s at the moment.", in.InstanceType, in.Zone)}
		}
	}
	prev := previousStates(ins)
	for _, in := range ins {
		if in.State == EC2Stopped {
			w.start(in, now)
		}
	}
	return stateChanges("StartInstances", ins, prev), nil
}

// stopInstances stops running instances. A Spot instance can be stopped
// only if its request is persistent (a one-time request's instance
// cannot).
func (w *ec2World) stopInstances(p url.Values) (any, *queryError) {
	now, ins, qe := w.settledInstances(p)
	if qe != nil {
		return nil, qe
	}
	for _, in := range ins {
		if req := w.requests[in.SpotRequestID]; req != nil && req.Type != "persistent" {
			return nil, ec2Invalid("UnsupportedOperation", "You can't stop the Spot Instance '%s' because it is associated with a one-time Spot Instance request. You can only stop Spot Instances associated with persistent Spot Instance requests.", in.ID)
		}
		if in.State == EC2Pending || in.State == EC2ShuttingDown || in.State == EC2Terminated {
			return nil, ec2Invalid("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be stopped.", in.ID)
		}
	}
	prev := previousStates(ins)
	for _, in := range ins {
		if in.State == EC2Running {
			w.stop(in, now, ReasonUserShutdown, userShutdown)
		}
	}
	return stateChanges("StopInstances", ins, prev), nil
}

// terminateInstances ends instances. The Spot request of a terminated
// instance that was not cancelled first launches a replacement if it is
// persistent (as EC2 does), and closes if it is one-time.
func (w *ec2World) terminateInstances(p url.Values) (any, *queryError) {
	now, ins, qe := w.settledInstances(p)
	if qe != nil {
		return nil, qe
	}
	prev := previousStates(ins)
	for _, in := range ins {
		if in.State == EC2ShuttingDown || in.State == EC2Terminated {
			continue
		}
		in.shutDown(now, EC2ShuttingDown, now.Add(w.timing.ShuttingDown), ReasonUserShutdown, userShutdown)
		in.StoppedByEC2 = false
		req := w.requests[in.SpotRequestID]
		switch {
		case req == nil || req.State == "cancelled" || req.State == "closed":
		case req.Type == "persistent":
			next := w.launch(in.spec, now)
			next.SpotRequestID = req.ID
			req.State, req.Status, req.InstanceID = "active", "fulfilled", next.ID
		default:
			req.State, req.Status = "closed", "instance-terminated-by-user"
		}
	}
	return stateChanges("TerminateInstances", ins, prev), nil
}

// request finds a Spot request, answering EC2's error for an unknown id.
func (w *ec2World) request(id string) (*SpotRequest, *queryError) {
	req, ok := w.requests[id]
	if !ok {
		return nil, ec2Invalid("InvalidSpotInstanceRequestID.NotFound", "The spot instance request ID '%s' does not exist", id)
	}
	return req, nil
}

func (w *ec2World) cancelSpotRequests(p url.Values) (any, *queryError) {
	now := w.now()
	w.settle(now)
	ids := ec2List(p, "SpotInstanceRequestId")
	if len(ids) == 0 {
		return nil, ec2Invalid("MissingParameter", "The request must contain the parameter SpotInstanceRequestId")
	}
	type item struct {
		ID    string `xml:"spotInstanceRequestId"`
		State string `xml:"state"`
	}
	out := struct {
		XMLName xml.Name `xml:"CancelSpotInstanceRequestsResponse"`
		XMLNS   string   `xml:"xmlns,attr"`
		Items   []item   `xml:"spotInstanceRequestSet>item"`
	}{XMLNS: ec2XMLNS}
	for _, id := range ids {
		req, qe := w.request(id)
		if qe != nil {
			return nil, qe
		}
		if req.State != "cancelled" && req.State != "closed" {
			req.State, req.Status = "cancelled", "request-canceled-and-instance-running"
			if in := w.instances[req.InstanceID]; in == nil || in.State == EC2Terminated || in.State == EC2ShuttingDown {
				req.Status = "canceled-before-fulfillment"
			}
		}
		out.Items = append(out.Items, item{req.ID, req.State})
	}
	return out, nil
}

// ec2Filters reads Filter.N.Name and Filter.N.Value.M.
func ec2Filters(p url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name, ok := p[fmt.Sprintf("Filter.%d.Name", i)]
		if !ok {
			return out
		}
		out[name[0]] = append(out[name[0]], ec2List(p, fmt.Sprintf("Filter.%d.Value", i))...)
	}
}

// matches reports whether an instance passes every filter DescribeInstances
// was given (instance-id, instance-state-name, instance-type,
// availability-zone, instance-lifecycle, spot-instance-request-id,
// tag-key and tag:KEY).
func (in *ec2Instance) matches(filters map[string][]string) (bool, *queryError) {
	for name, values := range filters {
		var have []string
		switch {
		case name == "instance-id":
			have = []string{in.ID}
		case name == "instance-state-name":
			have = []string{in.State}
		case name == "instance-type":
			have = []string{in.InstanceType}
		case name == "availability-zone":
			have = []string{in.Zone}
		case name == "instance-lifecycle":
			if in.SpotRequestID != "" {
				have = []string{"spot"}
			}
		case name == "spot-instance-request-id":
			have = []string{in.SpotRequestID}
		case name == "tag-key":
			for k := range in.Tags {
				have = append(have, k)
			}
		case strings.HasPrefix(name, "tag:"):
			if v, ok := in.Tags[strings.TrimPrefix(name, "tag:")]; ok {
				have = []string{v}
			}
		default:
			return false, ec2Invalid("InvalidParameterValue", "The filter '%s' is invalid", name)
		}
		if !slices.ContainsFunc(values, func(v string) bool { return slices.Contains(have, v) }) {
			return false, nil
		}
	}
	return true, nil
}

// describeInstances answers the instances named by InstanceId.N (all when
// none) that pass the filters, each in its reservation. It answers every
// match in one page.
func (w *ec2World) describeInstances(p url.Values) (any, *queryError) {
	now := w.now()
	w.settle(now)
	var ins []*ec2Instance
	if len(ec2List(p, "InstanceId")) > 0 {
		var qe *queryError
		if ins, qe = w.instancesOf(p); qe != nil {
			return nil, qe
		}
	} else {
		for _, id := range w.order {
			ins = append(ins, w.instances[id])
		}
	}
	filters := ec2Filters(p)
	type reservation struct {
		ID        string           `xml:"reservationId"`
		Owner     string           `xml:"ownerId"`
		Instances []xmlEC2Instance `xml:"instancesSet>item"`
	}
	out := struct {
		XMLName      xml.Name       `xml:"DescribeInstancesResponse"`
		XMLNS        string         `xml:"xmlns,attr"`
		Reservations []*reservation `xml:"reservationSet>item"`
	}{XMLNS: ec2XMLNS}
	byID := map[string]*reservation{}
	for _, in := range ins {
		ok, qe := in.matches(filters)
		if qe != nil {
			return nil, qe
		}
		if !ok {
			continue
		}
		r := byID[in.reservation]
		if r == nil {
			r = &reservation{ID: in.reservation, Owner: localAccountID}
			byID[in.reservation] = r
			out.Reservations = append(out.Reservations, r)
		}
		r.Instances = append(r.Instances, in.xml())
	}
	return out, nil
}

func (w *ec2World) describeSpotRequests(p url.Values) (any, *queryError) {
	now := w.now()
	w.settle(now)
	ids := ec2List(p, "SpotInstanceRequestId")
	if len(ids) == 0 {
		ids = w.reqOrder
	}
	filters := ec2Filters(p)
	type item struct {
		ID           string `xml:"spotInstanceRequestId"`
		State        string `xml:"state"`
		StatusCode   string `xml:"status>code"`
		Type         string `xml:"type"`
		InstanceID   string `xml:"instanceId,omitempty"`
		Zone         string `xml:"launchedAvailabilityZone"`
		Interruption string `xml:"instanceInterruptionBehavior"`
		CreateTime   string `xml:"createTime"`
	}
	out := struct {
		XMLName xml.Name `xml:"DescribeSpotInstanceRequestsResponse"`
		XMLNS   string   `xml:"xmlns,attr"`
		Items   []item   `xml:"spotInstanceRequestSet>item"`
	}{XMLNS: ec2XMLNS}
	for _, id := range ids {
		req, qe := w.request(id)
		if qe != nil {
			return nil, qe
		}
		keep := true
		for name, values := range filters {
			switch name {
			case "state":
				keep = keep && slices.Contains(values, req.State)
			case "instance-id":
				keep = keep && slices.Contains(values, req.InstanceID)
			default:
				return nil, ec2Invalid("InvalidParameterValue", "The filter '%s' is invalid", name)
			}
		}
		if keep {
			out.Items = append(out.Items, item{req.ID, req.State, req.Status, req.Type, req.InstanceID, req.Zone, req.InterruptionBehavior,
				req.Created.UTC().Format("2006-01-02T15:04:05.000Z")})
		}
	}
	return out, nil
}

// createTags tags instances (the embedded EC2 keeps no other resource's tags).
func (w *ec2World) createTags(p url.Values) (any, *queryError) {
	ids := ec2List(p, "ResourceId")
	if len(ids) == 0 {
		return nil, ec2Invalid("MissingParameter", "The request must contain the parameter ResourceId")
	}
	tags, qe := ec2Tags(p, "Tag")
	if qe != nil {
		return nil, qe
	}
	for _, id := range ids {
		if _, ok := w.instances[id]; !ok {
			return nil, ec2Invalid("InvalidID", "The ID '%s' is not valid", id)
		}
	}
	for _, id := range ids {
		for k, v := range tags {
			w.instances[id].Tags[k] = v
		}
	}
	return struct {
		XMLName xml.Name `xml:"CreateTagsResponse"`
		XMLNS   string   `xml:"xmlns,attr"`
		Return  bool     `xml:"return"`
	}{XMLNS: ec2XMLNS, Return: true}, nil
}
