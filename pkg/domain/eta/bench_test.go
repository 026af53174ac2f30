package eta

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// BenchmarkProject projects a fleet at its max of 50 busy instances with
// 2,000 jobs of four tenants queued (fair share on): it follows the first
// MaxProjected of them.
func BenchmarkProject(b *testing.B) {
	s := fleet(50)
	s.RunTimes = map[string]History{"render": {8 * time.Minute, 10 * time.Minute, 12 * time.Minute, 15 * time.Minute}}
	s.Tenants = func(id string) fleetconfig.Tenant { return fleetconfig.Tenant{ID: id} }
	for i := range 50 {
		s.busy(fmt.Sprint(i), fmt.Sprint("t", i%4), time.Duration(i)*10*time.Second)
	}
	for i := range 2000 {
		s.Queued = append(s.Queued, queued(fmt.Sprint("j", i), fmt.Sprint("t", i%4), time.Duration(2000-i)*time.Second))
	}
	b.ResetTimer()
	for range b.N {
		if es := Project(s, now); len(es) != 2000 || !es[MaxProjected-1].Known() || es[MaxProjected].Known() {
			b.Fatalf("%d estimates, the last %+v", len(es), es[len(es)-1])
		}
	}
}
