package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Units CloudWatch accepts. A metric without a unit is written as None.
const (
	UnitNone         = "None"
	UnitCount        = "Count"
	UnitPercent      = "Percent"
	UnitSeconds      = "Seconds"
	UnitMilliseconds = "Milliseconds"
	UnitMicroseconds = "Microseconds"
	UnitBytes        = "Bytes"
	UnitCountPerSec  = "Count/Second"
)

var units = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true,
	"Bytes": true, "Kilobytes": true, "Megabytes": true, "Gigabytes": true, "Terabytes": true,
	"Bits": true, "Kilobits": true, "Megabits": true, "Gigabits": true, "Terabits": true,
	"Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true, "Terabytes/Second": true,
	"Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true, "Gigabits/Second": true, "Terabits/Second": true,
	"Count/Second": true, "None": true,
}

// Limits of one EMF document (CloudWatch's, not ours).
const (
	MaxMetrics     = 100 // metric definitions per directive
	MaxDimensions  = 30  // keys per dimension set
	maxNameLen     = 255 // namespace, metric and dimension names
	maxDimValueLen = 1024
)

// Metric is one value to publish.
type Metric struct {
	Name  string
	Unit  string // one of the Unit constants; "" means None
	Value float64
}

// ErrInvalid wraps every refusal of Emit: nothing is written.
var ErrInvalid = errors.New("invalid EMF metrics")

type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// Emit writes metrics under namespace with the dimensions dims (every
// metric gets all of them, as one dimension set), stamped at, as one EMF
// JSON line in a single Write. Keys, dimension names and metrics are sorted,
// so the same input gives the same bytes.
//
// It refuses (ErrInvalid, nothing written) what CloudWatch would drop or
// misread: an empty or AWS/ namespace, no metrics or more than 100, more than
// 30 dimensions, empty or duplicate names, a metric named like a dimension
// (both would be the same top-level key), an unknown unit, a value that is
// NaN or infinite, a zero time.
func Emit(w io.Writer, namespace string, dims map[string]string, metrics []Metric, at time.Time) error {
	line, err := Encode(namespace, dims, metrics, at)
	if err != nil {
		return err
	}
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("write EMF line: %w", err)
	}
	return nil
}

// Encode returns the line Emit writes, newline included.
func Encode(namespace string, dims map[string]string, metrics []Metric, at time.Time) ([]byte, error) {
	if err := validate(namespace, dims, metrics, at); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	root := make(map[string]any, len(dims)+len(metrics)+1)
	dimNames := make([]string, 0, len(dims))
	for k, v := range dims {
		dimNames = append(dimNames, k)
		root[k] = v
	}
	sort.Strings(dimNames)
	defs := make([]definition, 0, len(metrics))
	for _, m := range metrics {
		unit := m.Unit
		if unit == "" {
			unit = UnitNone
		}
		defs = append(defs, definition{Name: m.Name, Unit: unit})
		root[m.Name] = m.Value
	}
	slices.SortFunc(defs, func(a, b definition) int { return strings.Compare(a.Name, b.Name) })
	root["_aws"] = metadata{
		Timestamp: at.UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace:  namespace,
			Dimensions: [][]string{dimNames},
			Metrics:    defs,
		}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // maps marshal with sorted keys
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encode EMF line: %w", err)
	}
	return buf.Bytes(), nil
}

func validate(namespace string, dims map[string]string, metrics []Metric, at time.Time) error {
	switch {
	case namespace == "" || len(namespace) > maxNameLen:
		return fmt.Errorf("namespace %q must be 1 to %d characters", namespace, maxNameLen)
	case strings.HasPrefix(namespace, "AWS/"):
		return fmt.Errorf("namespace %q: AWS/ is reserved for AWS services", namespace)
	case len(metrics) == 0:
		return errors.New("no metrics")
	case len(metrics) > MaxMetrics:
		return fmt.Errorf("%d metrics, at most %d in one line", len(metrics), MaxMetrics)
	case len(dims) > MaxDimensions:
		return fmt.Errorf("%d dimensions, at most %d", len(dims), MaxDimensions)
	case at.IsZero():
		return errors.New("no timestamp")
	}
	for k, v := range dims {
		if err := checkName("dimension", k); err != nil {
			return err
		}
		if v == "" || len(v) > maxDimValueLen {
			return fmt.Errorf("dimension %q: value must be 1 to %d characters", k, maxDimValueLen)
		}
	}
	seen := make(map[string]bool, len(metrics))
	for _, m := range metrics {
		if err := checkName("metric", m.Name); err != nil {
			return err
		}
		if _, ok := dims[m.Name]; ok {
			return fmt.Errorf("metric %q has the name of a dimension", m.Name)
		}
		if seen[m.Name] {
			return fmt.Errorf("metric %q given twice", m.Name)
		}
		seen[m.Name] = true
		if m.Unit != "" && !units[m.Unit] {
			return fmt.Errorf("metric %q: unknown unit %q", m.Name, m.Unit)
		}
		if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			return fmt.Errorf("metric %q: value %v is not a finite number", m.Name, m.Value)
		}
	}
	return nil
}

func checkName(kind, name string) error {
	switch {
	case name == "" || len(name) > maxNameLen:
		return fmt.Errorf("%s name %q must be 1 to %d characters", kind, name, maxNameLen)
	case name == "_aws":
		return fmt.Errorf("%s name %q is reserved for EMF metadata", kind, name)
	}
	return nil
}
