// Package logging builds the JSON logger every fleetq process writes: the
// functions, the dev stack and the worker agent.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// New returns a JSON logger at level (debug, info, warn or error) writing
// to w (os.Stderr when nil).
func New(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}
