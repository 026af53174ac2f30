package cost

import (
	"math"
	"testing"
	"time"
)

func TestVolumes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, gb int
		d     time.Duration
		want  float64
	}{
		// 12 stopped instances of 60 GB for a day: 720 GB × $0.08 × 24/730.
		{12, 60, 24 * time.Hour, 720 * 0.08 * 24 / 730},
		// A month of one 100 GB volume is its list price.
		{1, 100, 730 * time.Hour, 8},
		{0, 60, time.Hour, 0},
		{3, 60, -time.Hour, 0},
	} {
		if got := Volumes(c.n, c.gb, GP3PricePerGBMonth, c.d); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Volumes(%d, %d GB, %s) = %.6f, want %.6f", c.n, c.gb, c.d, got, c.want)
		}
	}
}
