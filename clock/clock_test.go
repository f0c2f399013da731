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

func TestFake(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := NewFake(t0)
	after := c.After(time.Minute)
	tick, stop := c.NewTicker(20 * time.Second)
	c.Advance(30 * time.Second)
	if got := (<-tick).Sub(t0); got != 20*time.Second {
		t.Errorf("first tick at %v", got)
	}
	select {
	case <-after:
		t.Fatal("After(1m) fired at 30s")
	default:
	}
	c.Advance(50 * time.Second) // ticks at 40s and 60s: one is kept
	if got := (<-after).Sub(t0); got != time.Minute {
		t.Errorf("After(1m) fired at %v", got)
	}
	if got := (<-tick).Sub(t0); got != 40*time.Second {
		t.Errorf("kept tick at %v, want the first unread one (40s)", got)
	}
	stop()
	c.Advance(time.Hour)
	select {
	case <-tick:
		t.Error("a stopped ticker ticked")
	default:
	}
	if got := c.Now().Sub(t0); got != time.Hour+80*time.Second {
		t.Errorf("Now is %v after the start", got)
	}
}
