package runtimeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// EnvAPI is the variable in which Lambda gives a custom runtime the Runtime
// API's host and port.
const EnvAPI = "AWS_LAMBDA_RUNTIME_API"

// InitErrorType is the error type fleetq's functions report: the function
// could not be built from its environment.
const InitErrorType = "Runtime.InitError"

// initError is the body the Runtime API takes: the same shape as an
// invocation error.
type initError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// ReportInitError posts err to the Runtime API at api (host:port) as the
// function's initialization error (POST /2018-06-01/runtime/init/error).
// Lambda then fails the pending invocation with that message; the runtime
// should exit afterwards.
func ReportInitError(ctx context.Context, api string, err error) error {
	body, _ := json.Marshal(initError{ErrorMessage: err.Error(), ErrorType: InitErrorType})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if rerr != nil {
		return fmt.Errorf("report init error: %w", rerr)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", InitErrorType)
	resp, rerr := http.DefaultClient.Do(req)
	if rerr != nil {
		return fmt.Errorf("report init error: %w", rerr)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("report init error: the Runtime API answered %s", resp.Status)
	}
	return nil
}
