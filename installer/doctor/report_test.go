package doctor

import (
	"strings"
	"testing"
)

func TestVerdictNamesTheDecidingChecks(t *testing.T) {
	check := func(name string, s Status) Check { return Check{Name: name, Status: s} }
	for _, tc := range []struct {
		checks []Check
		code   int
		line   string
	}{
		{[]Check{check("a", Pass)}, 0, ""},
		{[]Check{check("a", Warn), check("b", Pass)}, 2, "1 check warned: a"},
		{[]Check{check("a", Warn), check("b", Fail), check("c", Fail)}, 1, "2 checks failed: b, c"},
	} {
		if code, line := Verdict(tc.checks); code != tc.code || line != tc.line {
			t.Errorf("Verdict(%v) = %d, %q; want %d, %q", tc.checks, code, line, tc.code, tc.line)
		}
	}
}

func TestWriteTextCountsAndGivesFixes(t *testing.T) {
	var b strings.Builder
	err := WriteText(&b, []Check{
		{Name: "disk", Status: Pass, Evidence: "1 TiB free"},
		{Name: "docker", Status: Fail, Evidence: "no answer", Fix: "start it"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pass  disk", "fail  docker  no answer", "fix: start it", "1 passed, 0 warned, 1 failed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
