package devstack

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fleetq/fleetq/pkg/service/api"
)

// The stack's API answers plain HTTP with its operator token. A deployed
// stage puts two HTTP APIs of API Gateway in front of the same function
// (infra, docs/security.md): the API, whose producer and operator routes
// need SigV4 and hand the function the caller's IAM identity, and the key
// API, which serves only the producer routes and no identity. IAMGateway
// and KeyGateway play them, so a client can be run exactly as against a
// deployed stage: SigV4 signed with credentials the stack's STS issued.

// IAMGateway is the stage's API as API Gateway serves it: a producer or
// operator route needs a request signed (SigV4, service execute-api) with
// credentials the stack's STS issued, else API Gateway's own 403; the
// function gets the signer's ARN as the IAM authorizer's identity. Other
// routes pass without an identity.
func (s *Stack) IAMGateway() http.Handler {
	iam := routeMux(func(r api.Route) bool { return r.Auth == api.AuthProducer || r.Auth == api.AuthOperator })
	proxy := httpadapter.NewV2(s.API)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			gatewayError(w, http.StatusBadRequest, "Bad Request")
			return
		}
		arn := ""
		if _, pattern := iam.Handler(r); pattern != "" {
			if s.STS == nil { // no local fleet, no STS: nobody can sign
				gatewayError(w, http.StatusForbidden, "Forbidden")
				return
			}
			caller, err := s.STS.Verify(r, body, "execute-api")
			if err != nil {
				gatewayError(w, http.StatusForbidden, "Forbidden")
				return
			}
			arn = caller.ARN()
		}
		forward(w, r, body, arn, proxy)
	})
}

// KeyGateway is the stage's key API: the producer routes only, without an
// identity (the function checks the API key); any other route is API
// Gateway's own 404.
func (s *Stack) KeyGateway() http.Handler {
	producer := routeMux(func(r api.Route) bool { return r.Auth == api.AuthProducer })
	proxy := httpadapter.NewV2(s.API)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := producer.Handler(r); pattern == "" {
			gatewayError(w, http.StatusNotFound, "Not Found")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			gatewayError(w, http.StatusBadRequest, "Bad Request")
			return
		}
		forward(w, r, body, "", proxy)
	})
}

// routeMux matches the API's routes that keep says.
func routeMux(keep func(api.Route) bool) *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range api.Routes() {
		if keep(r) {
			mux.HandleFunc(r.Method+" "+r.Pattern, func(http.ResponseWriter, *http.Request) {})
		}
	}
	return mux
}

// forward hands the request to the function as API Gateway's Lambda
// integration does (payload 2.0), with arn as the IAM identity ("" none),
// and writes its answer.
func forward(w http.ResponseWriter, r *http.Request, body []byte, arn string, proxy *httpadapter.HandlerAdapterV2) {
	headers := map[string]string{}
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: r.Method + " " + r.URL.Path, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: headers, Body: string(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, SourceIP: "127.0.0.1"},
		},
	}
	if arn != "" {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn},
		}
	}
	res, err := proxy.ProxyWithContext(r.Context(), ev)
	if err != nil {
		gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	for k, v := range res.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range res.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	out := []byte(res.Body)
	if res.IsBase64Encoded {
		if out, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
	}
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(out)
}

// gatewayError is API Gateway's own answer, not the API's error shape.
func gatewayError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"message":"`+msg+`"}`)
}
