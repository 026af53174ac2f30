package scaling

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecide: one decision for a fleet of 200 instances (the scaler
// runs one per fleet per minute; the simulator thousands per day).
func BenchmarkDecide(b *testing.B) {
	f := &fleet{}
	for i := range 200 {
		f.worker(i%2, time.Duration(i)*time.Second)
	}
	in := f.input(50, 100)
	in.Settings.Max = 300
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(in); d.Desired < 0 {
			b.Fatal(fmt.Sprint(d))
		}
	}
}
