package metrics_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/metrics"
)

var at = time.Date(2026, 11, 23, 6, 30, 0, 123_000_000, time.UTC)

// emfDoc is the EMF document shape, for reading lines back.
type emfDoc struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
}

func TestEmitWritesOneEMFLine(t *testing.T) {
	var buf bytes.Buffer
	err := metrics.Emit(&buf, "fleetq", map[string]string{"Stage": "dev", "Fleet": "gpu"}, []metrics.Metric{
		{Name: "Queued", Unit: metrics.UnitCount, Value: 12},
		{Name: "Desired", Unit: metrics.UnitCount, Value: 3},
		{Name: "OldestQueuedAge", Unit: metrics.UnitSeconds, Value: 41.5},
		{Name: "Utilization", Unit: metrics.UnitPercent, Value: 87.5},
		{Name: "Ratio", Value: 0.25},
	}, at)
	if err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("not one line: %q", line)
	}

	var doc emfDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AWS.Timestamp != at.UnixMilli() {
		t.Errorf("Timestamp = %d, want %d (ms)", doc.AWS.Timestamp, at.UnixMilli())
	}
	if len(doc.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("directives = %d, want 1", len(doc.AWS.CloudWatchMetrics))
	}
	d := doc.AWS.CloudWatchMetrics[0]
	if d.Namespace != "fleetq" {
		t.Errorf("Namespace = %q", d.Namespace)
	}
	if len(d.Dimensions) != 1 || strings.Join(d.Dimensions[0], ",") != "Fleet,Stage" {
		t.Errorf("Dimensions = %v, want [[Fleet Stage]]", d.Dimensions)
	}
	var defs []string
	for _, m := range d.Metrics {
		defs = append(defs, m.Name+":"+m.Unit)
	}
	if got := strings.Join(defs, ","); got != "Desired:Count,OldestQueuedAge:Seconds,Queued:Count,Ratio:None,Utilization:Percent" {
		t.Errorf("Metrics = %s", got)
	}

	// Target members: dimension values as strings, metric values as numbers.
	var flat map[string]any
	if err := json.Unmarshal(buf.Bytes(), &flat); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"Fleet": "gpu", "Stage": "dev", "Queued": 12.0, "Desired": 3.0, "OldestQueuedAge": 41.5, "Utilization": 87.5, "Ratio": 0.25}
	for k, v := range want {
		if flat[k] != v {
			t.Errorf("%s = %#v, want %#v", k, flat[k], v)
		}
	}
	if len(flat) != len(want)+1 {
		t.Errorf("top-level keys = %d, want %d (targets and _aws)", len(flat), len(want)+1)
	}
}

func TestEmitIsStableAndExact(t *testing.T) {
	dims := map[string]string{"b": "2", "a": "1", "c": "3"}
	ms := []metrics.Metric{{Name: "z", Unit: "Count", Value: 1}, {Name: "y", Value: 2}, {Name: "x", Unit: "Seconds", Value: 0.5}}
	want := `{"_aws":{"Timestamp":1795415400123,"CloudWatchMetrics":[{"Namespace":"ns","Dimensions":[["a","b","c"]],"Metrics":[{"Name":"x","Unit":"Seconds"},{"Name":"y","Unit":"None"},{"Name":"z","Unit":"Count"}]}]},"a":"1","b":"2","c":"3","x":0.5,"y":2,"z":1}` + "\n"
	for i := range 20 {
		line, err := metrics.Encode("ns", dims, ms, at)
		if err != nil {
			t.Fatal(err)
		}
		if string(line) != want {
			t.Fatalf("run %d:\n got %s\nwant %s", i, line, want)
		}
	}
}

func TestEmitWithoutDimensions(t *testing.T) {
	line, err := metrics.Encode("fleetq", nil, []metrics.Metric{{Name: "Ticks", Unit: "Count", Value: 1}}, at)
	if err != nil {
		t.Fatal(err)
	}
	var doc emfDoc
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	// One empty dimension set: the metric is published with no dimensions.
	if d := doc.AWS.CloudWatchMetrics[0].Dimensions; len(d) != 1 || len(d[0]) != 0 {
		t.Errorf("Dimensions = %v, want [[]]", d)
	}
	if !bytes.Contains(line, []byte(`"Dimensions":[[]]`)) {
		t.Errorf("line %s lacks an empty dimension set", line)
	}
}

// countingWriter counts Write calls.
type countingWriter struct {
	writes int
	err    error
	bytes.Buffer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.err != nil {
		return 0, w.err
	}
	return w.Buffer.Write(p)
}

func TestEmitWritesOnceAndReportsWriteErrors(t *testing.T) {
	w := &countingWriter{}
	if err := metrics.Emit(w, "fleetq", map[string]string{"Fleet": "gpu"}, []metrics.Metric{{Name: "A", Value: 1}, {Name: "B", Value: 2}}, at); err != nil {
		t.Fatal(err)
	}
	if w.writes != 1 {
		t.Errorf("writes = %d, want 1 (lines must not interleave)", w.writes)
	}
	broken := errors.New("stdout closed")
	w = &countingWriter{err: broken}
	if err := metrics.Emit(w, "fleetq", nil, []metrics.Metric{{Name: "A", Value: 1}}, at); !errors.Is(err, broken) {
		t.Errorf("err = %v, want the writer's error", err)
	}
}

func TestEmitRefusesInvalidInput(t *testing.T) {
	one := []metrics.Metric{{Name: "Queued", Unit: "Count", Value: 1}}
	many := func(n int) []metrics.Metric {
		var ms []metrics.Metric
		for i := range n {
			ms = append(ms, metrics.Metric{Name: "m" + strconv.Itoa(i), Value: 1})
		}
		return ms
	}
	manyDims := map[string]string{}
	for i := range 31 {
		manyDims["d"+strconv.Itoa(i)] = "v"
	}
	cases := []struct {
		name      string
		namespace string
		dims      map[string]string
		metrics   []metrics.Metric
		at        time.Time
		mention   string
	}{
		{"metric named like a dimension", "fleetq", map[string]string{"Fleet": "gpu", "Queued": "x"}, one, at, `"Queued"`},
		{"duplicate metric", "fleetq", nil, []metrics.Metric{{Name: "A", Value: 1}, {Name: "A", Value: 2}}, at, `"A"`},
		{"unknown unit", "fleetq", nil, []metrics.Metric{{Name: "A", Unit: "Jobs", Value: 1}}, at, `"Jobs"`},
		{"unit in the wrong case", "fleetq", nil, []metrics.Metric{{Name: "A", Unit: "count", Value: 1}}, at, `"count"`},
		{"NaN", "fleetq", nil, []metrics.Metric{{Name: "A", Value: math.NaN()}}, at, `"A"`},
		{"infinity", "fleetq", nil, []metrics.Metric{{Name: "A", Value: math.Inf(1)}}, at, `"A"`},
		{"empty namespace", "", nil, one, at, "namespace"},
		{"AWS namespace", "AWS/EC2", nil, one, at, "AWS/"},
		{"no metrics", "fleetq", nil, nil, at, "no metrics"},
		{"too many metrics", "fleetq", nil, many(101), at, "101"},
		{"too many dimensions", "fleetq", manyDims, one, at, "31"},
		{"empty metric name", "fleetq", nil, []metrics.Metric{{Name: "", Value: 1}}, at, "metric name"},
		{"empty dimension name", "fleetq", map[string]string{"": "x"}, one, at, "dimension name"},
		{"empty dimension value", "fleetq", map[string]string{"Fleet": ""}, one, at, `"Fleet"`},
		{"metric named _aws", "fleetq", nil, []metrics.Metric{{Name: "_aws", Value: 1}}, at, "_aws"},
		{"zero time", "fleetq", nil, one, time.Time{}, "timestamp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &countingWriter{}
			err := metrics.Emit(w, c.namespace, c.dims, c.metrics, c.at)
			if !errors.Is(err, metrics.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %q", err, c.mention)
			}
			if w.writes != 0 {
				t.Errorf("wrote %q despite the error", w.String())
			}
		})
	}
}

func TestEmitAcceptsLimits(t *testing.T) {
	var ms []metrics.Metric
	for i := range metrics.MaxMetrics {
		ms = append(ms, metrics.Metric{Name: "m" + strconv.Itoa(i), Unit: "Count/Second", Value: float64(i)})
	}
	dims := map[string]string{}
	for i := range metrics.MaxDimensions {
		dims["d"+strconv.Itoa(i)] = "v"
	}
	line, err := metrics.Encode("fleetq", dims, ms, at)
	if err != nil {
		t.Fatal(err)
	}
	var doc emfDoc
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.AWS.CloudWatchMetrics[0]
	if len(d.Metrics) != metrics.MaxMetrics || len(d.Dimensions[0]) != metrics.MaxDimensions {
		t.Errorf("metrics = %d, dimensions = %d", len(d.Metrics), len(d.Dimensions[0]))
	}
}
