package doctor

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is a run of the checks as `hearth doctor --json` prints it.
// Field names are stable.
type Report struct {
	Checks []Check `json:"checks"`
}

// WriteText prints one line per check, its fix under it, and a count, as
// `hearth doctor` does.
func WriteText(w io.Writer, checks []Check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	counts := map[Status]int{}
	for _, c := range checks {
		counts[c.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Evidence)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d warned, %d failed\n", counts[Pass], counts[Warn], counts[Fail])
	return err
}

// Verdict is ExitCode of checks and, unless it is 0, one line naming the
// checks that decided it: "2 checks failed: a, b", "1 check warned: c".
func Verdict(checks []Check) (code int, line string) {
	code = ExitCode(checks)
	if code == 0 {
		return 0, ""
	}
	var names []string
	for _, c := range checks {
		if (code == 1 && c.Status == Fail) || (code == 2 && c.Status == Warn) {
			names = append(names, c.Name)
		}
	}
	count, verdict := fmt.Sprintf("%d checks", len(names)), "failed"
	if len(names) == 1 {
		count = "1 check"
	}
	if code == 2 {
		verdict = "warned"
	}
	return code, count + " " + verdict + ": " + strings.Join(names, ", ")
}
