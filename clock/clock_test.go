package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

// Real follows the fake time of a synctest bubble, which is what lets tests
// of code that takes a nil Clock run without waiting.
func TestRealInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Or(nil)
		start := c.Now()
		if got := (<-c.After(time.Hour)).Sub(start); got != time.Hour {
			t.Errorf("After(1h) fired %v after the start", got)
		}
		tick, stop := c.NewTicker(time.Minute)
		defer stop()
		for i := 1; i <= 2; i++ {
			if got := (<-tick).Sub(start); got != time.Hour+time.Duration(i)*time.Minute {
				t.Errorf("tick %d at %v after the start", i, got)
			}
		}
	})
}

func TestOrKeepsAClock(t *testing.T) {
	var c Clock = fixed{}
	if Or(c) != c {
		t.Error("Or replaced a clock it was given")
	}
}

type fixed struct{ Real }
