package localaws

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// LocalAccount is the account id of the embedded servers' resources.
const LocalAccount = "000000000000"

// stsMaxSkew is how far a request's X-Amz-Date may be from the server's
// clock, as STS allows.
const stsMaxSkew = 15 * time.Minute

// STSCaller is who a set of issued credentials belongs to: a role's
// session, as an instance profile's credentials are (the session name is
// the instance id).
type STSCaller struct {
	Role    string // the role's name
	Session string // the role session's name
}

// ARN is the caller's assumed-role ARN, as GetCallerIdentity answers it.
func (c STSCaller) ARN() string {
	return "arn:aws:sts::" + LocalAccount + ":assumed-role/" + c.Role + "/" + c.Session
}

// RoleARN is the ARN of the caller's role.
func RoleARN(role string) string { return "arn:aws:iam::" + LocalAccount + ":role/" + role }

// STS is an in-process server for the one STS action fleetq uses,
// GetCallerIdentity (form-encoded POST, Version=2011-06-15, XML answers).
// Like STS, it answers only a request signed with Signature Version 4 by
// credentials it issued (Issue), dated within 15 minutes of its clock; any
// other signature, an unknown key or a missing session token is refused
// with STS's error codes. It is what attested registration forwards
// identity requests to on the dev stack and in tests.
type STS struct {
	*Server

	mu    sync.Mutex
	creds map[string]stsCredential // by access key id
	now   func() time.Time
	seq   int
	calls int
}

type stsCredential struct {
	secret, token string
	caller        STSCaller
}

// StartSTS starts an embedded STS server on addr ("" for any free port).
// now is its clock (nil: the wall clock): a test's fake clock must also
// drive the signatures' dates.
func StartSTS(addr string, now func() time.Time) (*STS, error) {
	if now == nil {
		now = time.Now
	}
	s := &STS{creds: map[string]stsCredential{}, now: now}
	srv, err := serve(addr, s)
	if err != nil {
		return nil, err
	}
	s.Server = srv
	return s, nil
}

// Issue mints temporary credentials (access key, secret key and session
// token) for a role session, as EC2 hands an instance profile's to its
// instance.
func (s *STS) Issue(c STSCaller) aws.Credentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("ASIALOCAL%011d", s.seq)
	cred := stsCredential{secret: randomHex(20), token: randomHex(32), caller: c}
	s.creds[id] = cred
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: cred.secret, SessionToken: cred.token, Source: "localaws.STS"}
}

// Calls counts the requests the server has received.
func (s *STS) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b)
}

// STSError is an error answer in the Query protocol's ErrorResponse shape.
type STSError struct {
	Status  int
	Code    string
	Message string
}

// ServeHTTP answers one request.
func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	s.seq++
	reqID := fmt.Sprintf("00000000-0000-4000-a000-%012d", s.seq)
	s.mu.Unlock()
	caller, e := s.authenticate(r)
	if e != nil {
		writeSTSError(w, reqID, *e)
		return
	}
	writeSTSIdentity(w, reqID, caller)
}

// authenticate checks the request's action and signature and answers who
// signed it.
func (s *STS) authenticate(r *http.Request) (STSCaller, *STSError) {
	if r.Method != http.MethodPost {
		return STSCaller{}, &STSError{http.StatusMethodNotAllowed, "InvalidHttpRequest", "only POST is served"}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return STSCaller{}, &STSError{http.StatusBadRequest, "MalformedQueryString", err.Error()}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return STSCaller{}, &STSError{http.StatusBadRequest, "MalformedQueryString", err.Error()}
	}
	if a := form.Get("Action"); a != "GetCallerIdentity" {
		return STSCaller{}, &STSError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s", a, form.Get("Version"))}
	}
	if v := form.Get("Version"); v != "2011-06-15" {
		return STSCaller{}, &STSError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation GetCallerIdentity for version %s", v)}
	}
	return s.verifySignature(r, body, "sts")
}

// Verify checks a request to another service signed with credentials the
// server issued, as that service would (an emulation of API Gateway's IAM
// authorizer uses it with "execute-api"), and answers who signed it.
func (s *STS) Verify(r *http.Request, body []byte, service string) (STSCaller, error) {
	c, e := s.verifySignature(r, body, service)
	if e != nil {
		return STSCaller{}, fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	return c, nil
}

var errMissingAuth = &STSError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"}

func signatureMismatch(msg string) *STSError {
	return &STSError{http.StatusForbidden, "SignatureDoesNotMatch", msg}
}

// verifySignature checks a Signature Version 4 Authorization header the
// way the service does: the credential scope, the key, the session token,
// the date, then the signature over the canonical request of the signed
// headers and the body.
func (s *STS) verifySignature(r *http.Request, body []byte, scoped string) (STSCaller, *STSError) {
	authz := r.Header.Get("Authorization")
	const algorithm = "AWS4-HMAC-SHA256"
	rest, ok := strings.CutPrefix(authz, algorithm+" ")
	if !ok {
		return STSCaller{}, errMissingAuth
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	signedHeaders := fields["SignedHeaders"]
	if len(scope) != 5 || signedHeaders == "" || fields["Signature"] == "" {
		return STSCaller{}, &STSError{http.StatusBadRequest, "IncompleteSignature", "Authorization header requires Credential, SignedHeaders and Signature"}
	}
	keyID, day, region, service, terminal := scope[0], scope[1], scope[2], scope[3], scope[4]
	if service != scoped || terminal != "aws4_request" {
		return STSCaller{}, signatureMismatch(fmt.Sprintf("Credential should be scoped to correct service: '%s', not %q", scoped, service))
	}
	s.mu.Lock()
	cred, known := s.creds[keyID]
	now := s.now()
	s.mu.Unlock()
	if !known {
		return STSCaller{}, &STSError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."}
	}
	if !hmac.Equal([]byte(r.Header.Get("X-Amz-Security-Token")), []byte(cred.token)) {
		return STSCaller{}, &STSError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, day) {
		return STSCaller{}, signatureMismatch("X-Amz-Date is missing, malformed or not the credential scope's date")
	}
	if skew := now.Sub(signedAt); skew > stsMaxSkew || skew < -stsMaxSkew {
		return STSCaller{}, signatureMismatch(fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 15 min.)",
			amzDate, now.UTC().Format("20060102T150405Z"), now.UTC().Format("20060102T150405Z")))
	}
	names := strings.Split(signedHeaders, ";")
	if !sort.StringsAreSorted(names) || !contains(names, "host") || !contains(names, "x-amz-date") {
		return STSCaller{}, signatureMismatch("SignedHeaders must be sorted and include host and x-amz-date")
	}
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return STSCaller{}, signatureMismatch("The provided X-Amz-Content-Sha256 header does not match what was computed.")
	}
	var canonical strings.Builder
	canonical.WriteString(r.Method + "\n" + canonicalPath(r.URL) + "\n" + canonicalQuery(r.URL.Query()) + "\n")
	for _, name := range names {
		canonical.WriteString(name + ":" + canonicalHeader(r, name) + "\n")
	}
	canonical.WriteString("\n" + signedHeaders + "\n" + payloadHash)
	crHash := sha256.Sum256([]byte(canonical.String()))
	credScope := strings.Join(scope[1:], "/")
	toSign := algorithm + "\n" + amzDate + "\n" + credScope + "\n" + hex.EncodeToString(crHash[:])
	key := hmacSHA256([]byte("AWS4"+cred.secret), day)
	for _, part := range []string{region, service, terminal} {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return STSCaller{}, signatureMismatch("The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	return cred.caller, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func canonicalPath(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return p
}

// canonicalQuery is the query string with keys and values escaped as
// SigV4 says (RFC 3986 unreserved characters kept) and sorted.
func canonicalQuery(q url.Values) string {
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, sigv4Escape(k)+"="+sigv4Escape(v))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func sigv4Escape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// canonicalHeader is one signed header's canonical value: its values,
// trimmed with inner runs of spaces collapsed, joined by commas.
func canonicalHeader(r *http.Request, name string) string {
	var values []string
	switch name {
	case "host":
		values = []string{r.Host}
	case "content-length":
		values = []string{strconv.FormatInt(r.ContentLength, 10)}
	default:
		values = r.Header.Values(name)
	}
	for i, v := range values {
		values[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(values, ",")
}

type xmlCallerIdentity struct {
	XMLName xml.Name `xml:"GetCallerIdentityResponse"`
	XMLNS   string   `xml:"xmlns,attr"`
	Result  struct {
		Arn     string `xml:"Arn"`
		UserID  string `xml:"UserId"`
		Account string `xml:"Account"`
	} `xml:"GetCallerIdentityResult"`
	Metadata xmlResponseMetadata `xml:"ResponseMetadata"`
}

func writeSTSIdentity(w http.ResponseWriter, reqID string, c STSCaller) {
	x := xmlCallerIdentity{XMLNS: stsXMLNS}
	x.Result.Arn, x.Result.Account = c.ARN(), LocalAccount
	x.Result.UserID = "AROALOCAL" + strings.ToUpper(hex.EncodeToString([]byte(c.Role))[:min(12, 2*len(c.Role))]) + ":" + c.Session
	x.Metadata.RequestID = reqID
	body, _ := xml.Marshal(x)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", reqID)
	_, _ = w.Write([]byte(xml.Header + string(body)))
}

func writeSTSError(w http.ResponseWriter, reqID string, e STSError) {
	writeQueryError(w, stsXMLNS, reqID, queryError{e.Status, e.Code, e.Message})
}
