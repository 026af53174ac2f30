package fleetconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WarmWindow keeps capacity ready ahead of demand during set hours of the
// day (UTC): the fleet holds at least MinInstances, and SpareInstances more
// than its work needs, while the window is open. EC2 Auto Scaling warm pools
// do not support Spot or mixed-instances groups, so the scaler keeps the
// warmth itself. The idle window and the scale-in grace still apply when
// the window closes.
type WarmWindow struct {
	// Days the window opens on (mon ... sun); empty means every day.
	Days []string `yaml:"days"`
	// From and To are UTC times of day, HH:MM. To is exclusive; a To before
	// From wraps past midnight; From equal to To is the whole day.
	From string `yaml:"from"`
	To   string `yaml:"to"`
	// MinInstances is the floor while the window is open.
	MinInstances int `yaml:"min_instances"`
	// SpareInstances are instances kept beyond what the ready and leased
	// jobs need, so the first jobs of a burst find a free slot.
	SpareInstances int `yaml:"spare_instances"`
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// Active reports whether the window is open at t.
func (w WarmWindow) Active(t time.Time) bool {
	t = t.UTC()
	from, err1 := clockMinutes(w.From)
	to, err2 := clockMinutes(w.To)
	if err1 != nil || err2 != nil {
		return false
	}
	m := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	var open bool
	switch {
	case from == to:
		open = true
	case from < to:
		open = m >= from && m < to
	case m >= from:
		open = true
	default:
		// Past midnight of a window that opened the day before.
		open, day = m < to, (day+6)%7
	}
	return open && w.onDay(day)
}

func (w WarmWindow) onDay(d time.Weekday) bool {
	if len(w.Days) == 0 {
		return true
	}
	for _, s := range w.Days {
		if wd, ok := weekdays[strings.ToLower(s)]; ok && wd == d {
			return true
		}
	}
	return false
}

// String is the window in the form ParseWarmWindow reads.
func (w WarmWindow) String() string {
	s := w.From + "-" + w.To
	if w.MinInstances > 0 {
		s += fmt.Sprintf(",min=%d", w.MinInstances)
	}
	if w.SpareInstances > 0 {
		s += fmt.Sprintf(",spare=%d", w.SpareInstances)
	}
	if len(w.Days) > 0 {
		s += ",days=" + strings.Join(w.Days, "+")
	}
	return s
}

// ParseWarmWindow reads a window written on one line, as `fleetq simulate
// --warm` takes it: "08:00-22:00,min=2,spare=1[,days=mon+tue]".
func ParseWarmWindow(spec string) (WarmWindow, error) {
	parts := strings.Split(spec, ",")
	span := strings.SplitN(parts[0], "-", 2)
	if len(span) != 2 {
		return WarmWindow{}, fmt.Errorf("warm window %q: want HH:MM-HH:MM,min=N,spare=N[,days=mon+tue]", spec)
	}
	w := WarmWindow{From: span[0], To: span[1]}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "min", "spare":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return WarmWindow{}, fmt.Errorf("warm window %q: %s must be a whole number >= 0, got %q", spec, k, v)
			}
			if k == "min" {
				w.MinInstances = n
			} else {
				w.SpareInstances = n
			}
		case "days":
			w.Days = strings.Split(v, "+")
		default:
			return WarmWindow{}, fmt.Errorf("warm window %q: unknown setting %q (use min, spare, days)", spec, k)
		}
	}
	k := &checker{}
	w.validate("warm", MaxInstancesLimit, k)
	if len(k.problems) > 0 {
		p := k.problems[0]
		return WarmWindow{}, fmt.Errorf("warm window %q: %s: %s", spec, p.Field, p.Message)
	}
	return w, nil
}

// MaxInstancesLimit is the largest max_instances a fleet may have.
const MaxInstancesLimit = 1000

func (w WarmWindow) validate(at string, maxInstances int, k *checker) {
	if _, err := clockMinutes(w.From); err != nil {
		k.add(at+".from", "%q is not a UTC time of day (HH:MM)", w.From)
	}
	if _, err := clockMinutes(w.To); err != nil {
		k.add(at+".to", "%q is not a UTC time of day (HH:MM)", w.To)
	}
	for j, d := range w.Days {
		if _, ok := weekdays[strings.ToLower(d)]; !ok {
			k.add(fmt.Sprintf("%s.days[%d]", at, j), "%q is not a day (mon, tue, wed, thu, fri, sat, sun)", d)
		}
	}
	if w.MinInstances == 0 && w.SpareInstances == 0 {
		k.add(at, "sets neither min_instances nor spare_instances")
	}
	if w.MinInstances < 0 || w.MinInstances > maxInstances {
		k.add(at+".min_instances", "must be between 0 and max_instances (%d), got %d", maxInstances, w.MinInstances)
	}
	if w.SpareInstances < 0 || w.SpareInstances > maxInstances {
		k.add(at+".spare_instances", "must be between 0 and max_instances (%d), got %d", maxInstances, w.SpareInstances)
	}
}

func (f *Fleet) validateWarm(at string, k *checker) {
	for i, w := range f.Warm {
		w.validate(fmt.Sprintf("%s.warm[%d]", at, i), f.MaxInstances, k)
	}
}

// clockMinutes reads HH:MM as minutes since midnight.
func clockMinutes(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}
