package localaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The XML namespaces of the Query APIs Account serves, one per API version.
const (
	stsXMLNS = "https://sts.amazonaws.com/doc/2011-06-15/"
	cfnXMLNS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
	ec2XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
)

// Identity is who STS says the caller is.
type Identity struct {
	Account, Arn, UserID string
}

// Stack is a CloudFormation stack as DescribeStacks shows it.
type Stack struct {
	Name    string
	Status  string // CREATE_COMPLETE, UPDATE_ROLLBACK_COMPLETE, ...
	Outputs map[string]string
}

// InstanceType is what DescribeInstanceTypes says of an EC2 instance type.
type InstanceType struct {
	Name          string
	VCPUs         int
	Architectures []string // x86_64, arm64, i386
}

// Image is what DescribeImages says of an AMI.
type Image struct {
	ID, Architecture, State string
}

// SpotPrice is one entry of the Spot price history DescribeSpotPriceHistory
// answers: the price of an instance type in a zone from At on.
type SpotPrice struct {
	InstanceType string
	Zone         string
	// ProductDescription is "Linux/UNIX" unless set.
	ProductDescription string
	// USD is the hourly price, written as EC2 writes it ("0.452100").
	USD float64
	At  time.Time
}

// Account is an in-process server speaking the account-level Query APIs
// fleetq reads: STS GetCallerIdentity, CloudFormation DescribeStacks, and
// the EC2 query protocol's DescribeInstanceTypes, DescribeImages (preflight)
// and DescribeSpotPriceHistory (the scaler's Spot prices), and the instance
// actions of a stopped Spot pool (ec2.go: RunInstances, StartInstances,
// StopInstances, TerminateInstances, CancelSpotInstanceRequests,
// DescribeInstances, DescribeSpotInstanceRequests, CreateTags). Requests are form-encoded POSTs routed by Action and
// Version, as the real SDK clients send them; answers and errors have each
// service's XML shape. Everything else answers InvalidAction.
type Account struct {
	*Server

	mu         sync.Mutex
	identities map[string]Identity // by access key id
	stacks     map[string]Stack
	types      map[string]InstanceType
	images     map[string]Image
	spot       []SpotPrice
	denied     map[string]bool // EC2 actions answered UnauthorizedOperation
	requestSeq int
	ec2        ec2World // the instance API (ec2.go)
}

// StartAccount starts the server on addr ("" for any loopback port).
func StartAccount(addr string) (*Account, error) {
	a := &Account{identities: map[string]Identity{}, stacks: map[string]Stack{}, types: map[string]InstanceType{}, images: map[string]Image{}, denied: map[string]bool{}, ec2: newEC2World()}
	srv, err := serve(addr, a)
	if err != nil {
		return nil, err
	}
	a.Server = srv
	return a, nil
}

// PutIdentity makes requests signed with accessKeyID valid, as identity;
// requests signed with any other key are refused as STS refuses them.
func (a *Account) PutIdentity(accessKeyID string, id Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.identities[accessKeyID] = id
}

// PutStack creates or replaces a stack.
func (a *Account) PutStack(s Stack) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stacks[s.Name] = s
}

// PutInstanceType makes an instance type known to DescribeInstanceTypes.
func (a *Account) PutInstanceType(t InstanceType) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.types[t.Name] = t
}

// PutImage makes an AMI known to DescribeImages.
func (a *Account) PutImage(im Image) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if im.State == "" {
		im.State = "available"
	}
	a.images[im.ID] = im
}

// PutSpotPrice adds an entry to the Spot price history.
func (a *Account) PutSpotPrice(p SpotPrice) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.ProductDescription == "" {
		p.ProductDescription = "Linux/UNIX"
	}
	a.spot = append(a.spot, p)
}

// Deny makes an EC2 action answer UnauthorizedOperation, as EC2 answers a
// caller whose policy does not allow it (deny false allows it again).
func (a *Account) Deny(action string, deny bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.denied[action] = deny
}

// queryError is an error in one of the Query protocols' shapes.
type queryError struct {
	status        int
	code, message string
}

// credentialKey finds the access key id in a SigV4 Authorization header.
var credentialKey = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// ServeHTTP answers one Query API request.
func (a *Account) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requestSeq++
	reqID := fmt.Sprintf("00000000-0000-4000-8000-%012d", a.requestSeq)
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		writeQueryError(w, stsXMLNS, reqID, queryError{http.StatusBadRequest, "InvalidHttpRequest", "only form-encoded POST is served"})
		return
	}
	p := r.PostForm
	action, version := p.Get("Action"), p.Get("Version")
	switch {
	case version == "2016-11-15" && a.denied[action]:
		writeEC2Error(w, reqID, queryError{http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation."})
	case action == "GetCallerIdentity" && version == "2011-06-15":
		m := credentialKey.FindStringSubmatch(r.Header.Get("Authorization"))
		id, ok := Identity{}, false
		if m != nil {
			id, ok = a.identities[m[1]]
		}
		if !ok {
			writeQueryError(w, stsXMLNS, reqID, queryError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."})
			return
		}
		writeQueryResponse(w, stsXMLNS, action, reqID, struct {
			XMLName xml.Name `xml:"GetCallerIdentityResult"`
			Arn     string   `xml:"Arn"`
			UserID  string   `xml:"UserId"`
			Account string   `xml:"Account"`
		}{Arn: id.Arn, UserID: id.UserID, Account: id.Account})
	case action == "DescribeStacks" && version == "2010-05-15":
		res, qe := a.describeStacks(p)
		if qe != nil {
			writeQueryError(w, cfnXMLNS, reqID, *qe)
			return
		}
		writeQueryResponse(w, cfnXMLNS, action, reqID, res)
	case action == "DescribeInstanceTypes" && version == "2016-11-15":
		res, qe := a.describeInstanceTypes(p)
		if qe != nil {
			writeEC2Error(w, reqID, *qe)
			return
		}
		writeEC2Response(w, reqID, res)
	case action == "DescribeImages" && version == "2016-11-15":
		res, qe := a.describeImages(p)
		if qe != nil {
			writeEC2Error(w, reqID, *qe)
			return
		}
		writeEC2Response(w, reqID, res)
	case action == "DescribeSpotPriceHistory" && version == "2016-11-15":
		res, qe := a.describeSpotPriceHistory(p)
		if qe != nil {
			writeEC2Error(w, reqID, *qe)
			return
		}
		writeEC2Response(w, reqID, res)
	case version == "2016-11-15" && ec2Actions[action] != nil:
		res, qe := ec2Actions[action](&a.ec2, p)
		if qe != nil {
			writeEC2Error(w, reqID, *qe)
			return
		}
		writeEC2Response(w, reqID, res)
	default:
		writeQueryError(w, stsXMLNS, reqID, queryError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the action %s (version %s) is not served", action, version)})
	}
}

type xmlOutput struct {
	Key   string `xml:"OutputKey"`
	Value string `xml:"OutputValue"`
}

type xmlStack struct {
	Name         string      `xml:"StackName"`
	ID           string      `xml:"StackId"`
	Status       string      `xml:"StackStatus"`
	CreationTime string      `xml:"CreationTime"`
	Outputs      []xmlOutput `xml:"Outputs>member"`
}

func (a *Account) describeStacks(p url.Values) (any, *queryError) {
	name := p.Get("StackName")
	var names []string
	if name == "" {
		for n := range a.stacks {
			names = append(names, n)
		}
		slices.Sort(names)
	} else if _, ok := a.stacks[name]; ok {
		names = []string{name}
	} else {
		// CloudFormation's answer for a stack that does not exist.
		return nil, &queryError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("Stack with id %s does not exist", name)}
	}
	out := struct {
		XMLName xml.Name   `xml:"DescribeStacksResult"`
		Stacks  []xmlStack `xml:"Stacks>member"`
	}{}
	for _, n := range names {
		s := a.stacks[n]
		x := xmlStack{Name: s.Name, ID: "arn:aws:cloudformation:us-east-1:000000000000:stack/" + s.Name + "/local",
			Status: s.Status, CreationTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)}
		keys := make([]string, 0, len(s.Outputs))
		for k := range s.Outputs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			x.Outputs = append(x.Outputs, xmlOutput{Key: k, Value: s.Outputs[k]})
		}
		out.Stacks = append(out.Stacks, x)
	}
	return out, nil
}

// ec2List reads an EC2 query list parameter: Name.1, Name.2, ...
func ec2List(p url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := p[fmt.Sprintf("%s.%d", name, i)]
		if !ok || len(v) == 0 {
			return out
		}
		out = append(out, v[0])
	}
}

type xmlInstanceType struct {
	Type  string `xml:"instanceType"`
	VCPUs int    `xml:"vCpuInfo>defaultVCpus"`
	Archs []struct {
		V string `xml:",chardata"`
	} `xml:"processorInfo>supportedArchitectures>item"`
}

func (a *Account) describeInstanceTypes(p url.Values) (any, *queryError) {
	names := ec2List(p, "InstanceType")
	var missing []string
	out := struct {
		XMLName xml.Name          `xml:"DescribeInstanceTypesResponse"`
		XMLNS   string            `xml:"xmlns,attr"`
		Types   []xmlInstanceType `xml:"instanceTypeSet>item"`
	}{XMLNS: ec2XMLNS}
	for _, n := range names {
		t, ok := a.types[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		x := xmlInstanceType{Type: t.Name, VCPUs: t.VCPUs}
		for _, arch := range t.Architectures {
			x.Archs = append(x.Archs, struct {
				V string `xml:",chardata"`
			}{arch})
		}
		out.Types = append(out.Types, x)
	}
	if len(missing) > 0 {
		return nil, &queryError{http.StatusBadRequest, "InvalidInstanceType", fmt.Sprintf("The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))}
	}
	return out, nil
}

type xmlImage struct {
	ID    string `xml:"imageId"`
	State string `xml:"imageState"`
	Arch  string `xml:"architecture"`
}

func (a *Account) describeImages(p url.Values) (any, *queryError) {
	out := struct {
		XMLName xml.Name   `xml:"DescribeImagesResponse"`
		XMLNS   string     `xml:"xmlns,attr"`
		Images  []xmlImage `xml:"imagesSet>item"`
	}{XMLNS: ec2XMLNS}
	for _, id := range ec2List(p, "ImageId") {
		im, ok := a.images[id]
		if !ok {
			return nil, &queryError{http.StatusBadRequest, "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", id)}
		}
		out.Images = append(out.Images, xmlImage{ID: im.ID, State: im.State, Arch: im.Architecture})
	}
	return out, nil
}

// xmlSpotPrice is one item of spotPriceHistorySet. The shape is the EC2 API
// reference's (API_DescribeSpotPriceHistory and the SpotPrice data type,
// API version 2016-11-15: spotPriceHistorySet of item, each with
// availabilityZone, instanceType, productDescription, spotPrice as a
// decimal string, timestamp; nextToken beside the set), as the SDK's
// EC2 query deserializer reads it.
type xmlSpotPrice struct {
	Zone         string `xml:"availabilityZone"`
	InstanceType string `xml:"instanceType"`
	Product      string `xml:"productDescription"`
	Price        string `xml:"spotPrice"`
	Timestamp    string `xml:"timestamp"`
}

// describeSpotPriceHistory answers the history filtered by InstanceType.N,
// ProductDescription.N and AvailabilityZone, newest first. With StartTime
// it answers the entries from then (up to EndTime) and, as EC2 does, the
// last change before it: the price in force at StartTime. MaxResults and
// NextToken page through the answer.
func (a *Account) describeSpotPriceHistory(p url.Values) (any, *queryError) {
	parseTime := func(name string) (time.Time, *queryError) {
		v := p.Get(name)
		if v == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, &queryError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for %s", v, name)}
		}
		return t, nil
	}
	start, qe := parseTime("StartTime")
	if qe != nil {
		return nil, qe
	}
	end, qe := parseTime("EndTime")
	if qe != nil {
		return nil, qe
	}
	types, products, zone := ec2List(p, "InstanceType"), ec2List(p, "ProductDescription"), p.Get("AvailabilityZone")
	var match []SpotPrice
	for _, s := range a.spot {
		if (len(types) > 0 && !slices.Contains(types, s.InstanceType)) || (len(products) > 0 && !slices.Contains(products, s.ProductDescription)) ||
			(zone != "" && s.Zone != zone) || (!end.IsZero() && s.At.After(end)) {
			continue
		}
		match = append(match, s)
	}
	slices.SortStableFunc(match, func(x, y SpotPrice) int { return y.At.Compare(x.At) })
	if !start.IsZero() {
		kept := match[:0:0]
		before := map[string]bool{} // the last change before start, per series
		for _, s := range match {
			k := s.InstanceType + "\x00" + s.Zone + "\x00" + s.ProductDescription
			if s.At.Before(start) {
				if before[k] {
					continue
				}
				before[k] = true
			}
			kept = append(kept, s)
		}
		match = kept
	}
	from := 0
	if tok := p.Get("NextToken"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(match) {
			return nil, &queryError{http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid."}
		}
		from = n
	}
	limit := 1000
	if v := p.Get("MaxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, &queryError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for MaxResults", v)}
		}
		limit = min(n, 1000)
	}
	out := struct {
		XMLName xml.Name       `xml:"DescribeSpotPriceHistoryResponse"`
		XMLNS   string         `xml:"xmlns,attr"`
		Prices  []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
		Next    string         `xml:"nextToken,omitempty"`
	}{XMLNS: ec2XMLNS}
	to := min(from+limit, len(match))
	for _, s := range match[from:to] {
		out.Prices = append(out.Prices, xmlSpotPrice{Zone: s.Zone, InstanceType: s.InstanceType, Product: s.ProductDescription,
			Price: strconv.FormatFloat(s.USD, 'f', 6, 64), Timestamp: s.At.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	if to < len(match) {
		out.Next = strconv.Itoa(to)
	}
	return out, nil
}

// writeQueryResponse writes an awsQuery answer: <ActionResponse> holding
// the result element and the request id.
func writeQueryResponse(w http.ResponseWriter, ns, action, reqID string, result any) {
	body, err := xml.Marshal(xmlResponse{XMLName: xml.Name{Local: action + "Response"}, XMLNS: ns, Result: result,
		Metadata: xmlResponseMetadata{RequestID: reqID}})
	if err != nil {
		writeQueryError(w, ns, reqID, queryError{http.StatusInternalServerError, "InternalFailure", err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", reqID)
	_, _ = w.Write([]byte(xml.Header + string(body)))
}

// writeQueryError writes an awsQuery error: <ErrorResponse><Error>.
func writeQueryError(w http.ResponseWriter, ns, reqID string, e queryError) {
	x := xmlErrorResponse{XMLNS: ns, RequestID: reqID}
	x.Error.Type, x.Error.Code, x.Error.Message = "Sender", e.code, e.message
	if e.status >= 500 {
		x.Error.Type = "Receiver"
	}
	body, _ := xml.Marshal(x)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", reqID)
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header + string(body)))
}

// writeEC2Response writes an EC2 query answer: the action's element at the
// root, with the request id inside it and no result wrapper.
func writeEC2Response(w http.ResponseWriter, reqID string, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		writeEC2Error(w, reqID, queryError{http.StatusInternalServerError, "InternalError", err.Error()})
		return
	}
	s := string(body)
	// The request id is the answer's first child.
	if i := strings.Index(s, ">"); i >= 0 {
		s = s[:i+1] + "<requestId>" + reqID + "</requestId>" + s[i+1:]
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header + s))
}

// writeEC2Error writes an EC2 query error: <Response><Errors><Error>.
func writeEC2Error(w http.ResponseWriter, reqID string, e queryError) {
	x := struct {
		XMLName xml.Name `xml:"Response"`
		Errors  []struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Errors>Error"`
		RequestID string `xml:"RequestID"`
	}{RequestID: reqID}
	x.Errors = append(x.Errors, struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}{e.code, e.message})
	body, _ := xml.Marshal(x)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header + string(body)))
}
