package console

import (
	"testing"
	"time"
)

// BenchmarkCheckPassword measures one login's password check at the real
// iteration count: the price an attacker pays per guess, next to the
// limiter's waits.
func BenchmarkCheckPassword(b *testing.B) {
	digest, err := hashPassword("correct horse battery", passwordIterations)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := checkPassword(digest, "correct horse battery"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkSessionLookup measures what every console request pays to find
// its session.
func BenchmarkSessionLookup(b *testing.B) {
	s := newLoginStore(24*time.Hour, 12*time.Hour, newFakeClock(t0))
	token := s.create(ownerLogin)
	for range 100 {
		s.create(ownerLogin)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.get(token); !ok {
			b.Fatal("session lost")
		}
	}
}
