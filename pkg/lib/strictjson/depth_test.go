package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// nestedArrays is {"input":[[[…]]]} with the arrays n deep.
func nestedArrays(n int) []byte {
	return []byte(`{"input":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

// nestedObjects is {"input":{"a":{"a":…{}}}} with the objects n deep.
func nestedObjects(n int) []byte {
	return []byte(`{"input":` + strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1) + `}`)
}

// flatWide is {"input":[[0,0,…],[0,0,…],…]}: about size bytes, two levels deep.
func flatWide(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"input":[`)
	for b.Len() < size {
		if b.Len() > 10 {
			b.WriteString(",")
		}
		b.WriteString("[" + strings.Repeat("0,", 30) + "0]")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// A value may nest objects and arrays MaxDepth levels deep, the value of a
// top-level field counting as the first level; one more is refused naming
// the field and the limit.
func TestDecodeBoundsNesting(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"arrays at the limit", nestedArrays(MaxDepth), true},
		{"objects at the limit", nestedObjects(MaxDepth), true},
		{"arrays past the limit", nestedArrays(MaxDepth + 1), false},
		{"objects past the limit", nestedObjects(MaxDepth + 1), false},
		{"30 KB of arrays", nestedArrays(15 << 10), false},
		{"240 KB of objects", nestedObjects(40 << 10), false},
		{"unclosed arrays", []byte(`{"input":` + strings.Repeat("[", 100)), false},
	} {
		var s sample
		err := Decode(c.body, &s, false)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, `field "input"`) || !strings.Contains(e.Msg, fmt.Sprint(MaxDepth)) {
			t.Errorf("%s: %v, want an *Error naming the field and the limit", c.name, err)
		}
	}
	// The limit applies to a typed field as much as to a raw one.
	type deep struct {
		Items [][][]int `json:"items"`
	}
	var d deep
	if err := Decode([]byte(`{"items":`+strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1)+`}`), &d, false); err == nil || !strings.Contains(err.Error(), `field "items"`) {
		t.Errorf("typed field past the limit: %v", err)
	}
}

// Decoding a deeply nested body allocates in proportion to the body, not
// to the square of its depth. The bound is per byte of body, measured
// around the call; before the depth bound and the path stack, 30 KB of
// nested arrays allocated gigabytes here.
func TestDecodeAllocatesLinearly(t *testing.T) {
	const perByte = 96 // bytes allocated per byte of body, at most
	for _, body := range [][]byte{nestedArrays(15 << 10), nestedObjects(5 << 10), nestedArrays(120 << 10), nestedObjects(40 << 10), flatWide(240 << 10)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var s sample
		_ = Decode(body, &s, false)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > perByte*uint64(len(body))+64<<10 {
			t.Errorf("a %d-byte body allocated %d bytes, more than %d per byte", len(body), got, perByte)
		}
		if testing.Verbose() {
			t.Logf("%d-byte body: %d bytes allocated", len(body), after.TotalAlloc-before.TotalAlloc)
		}
	}
}

// BenchmarkDecodeDepth decodes bodies nested ever deeper. Below the limit
// the cost per level is constant; past it decoding stops at the limit, so
// a deeper body costs no more than one at the limit plus reading it.
func BenchmarkDecodeDepth(b *testing.B) {
	for _, n := range []int{8, 16, 32, 1 << 10, 8 << 10, 64 << 10} {
		for _, shape := range []struct {
			name string
			body func(int) []byte
		}{{"arrays", nestedArrays}, {"objects", nestedObjects}} {
			body := shape.body(n)
			b.Run(fmt.Sprintf("%s/depth=%d", shape.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for range b.N {
					var s sample
					_ = Decode(body, &s, false)
				}
			})
		}
	}
}

// BenchmarkKeyWalkUnbounded walks bodies nested ever deeper with the depth
// limit lifted: what each level costs by itself. Bytes and time per op
// grow in proportion to the depth (each level pushes one path segment);
// before the path became a stack of segments they grew with its square.
func BenchmarkKeyWalkUnbounded(b *testing.B) {
	for _, n := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10} {
		body := nestedArrays(n)
		b.Run(fmt.Sprintf("arrays/depth=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for range b.N {
				w := walker{dec: json.NewDecoder(bytes.NewReader(body)), limit: n + 1}
				if err := w.walk(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
