package daemon

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The tables of the commands that ask a running daemon (hearth engines,
// hearth models), beside the client they ask it with (AdminClient).

// WriteEngineTable writes a running daemon's engines as hearth engines
// prints them: one row each, then, in full, each start-up self-check that
// found a difference.
func WriteEngineTable(w io.Writer, engines []adminapi.Engine) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tKIND\tMODEL\tGPU\tSTATE\tPID/CONTAINER\tRESTARTS\tSINCE\tTOKENIZER\tKV EVENTS\tLAST ERROR")
	for _, e := range engines {
		pid := "-"
		switch {
		case e.PID > 0:
			pid = fmt.Sprint(e.PID)
		case e.Container != "":
			pid = e.Container
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.Name, e.Runtime, e.Kind, e.Model, gpuList(e),
			stateText(e), pid, e.Restarts, e.Since.Local().Format(time.TimeOnly), e.Tokenizer.Text(), e.KVEvents.Text(), e.LastError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A tokenizer that differs from Hearth's, or KV events Hearth cannot
	// follow, silently cost every predicted cache hit: say it in full
	// under the table.
	for _, e := range engines {
		if e.Tokenizer != nil && e.Tokenizer.State != string(hruntime.TokenizerAgrees) {
			if _, err := fmt.Fprintf(w, "%s: %s\n", e.Name, e.Tokenizer.Summary); err != nil {
				return err
			}
		}
		if e.KVEvents != nil && e.KVEvents.State != string(hruntime.KVEventsMatch) {
			if _, err := fmt.Fprintf(w, "%s: %s\n", e.Name, e.KVEvents.Summary); err != nil {
				return err
			}
		}
	}
	return nil
}

// stateText is an engine's state as `hearth engines` prints it: with the
// phase of its start while it loads ("loading: capturing CUDA graphs 40%").
func stateText(e adminapi.Engine) string {
	if e.Phase == "" {
		return e.State
	}
	s := e.State + ": " + hruntime.LoadPhase(e.Phase).Label()
	if e.Progress != nil {
		s += fmt.Sprintf(" %d%%", *e.Progress)
	}
	return s
}

// gpuList is an engine's GPU column: its GPU, or "0,1" for one engine over
// several GPUs.
func gpuList(e adminapi.Engine) string {
	if len(e.GPUs) < 2 {
		return strconv.Itoa(e.GPU)
	}
	ids := make([]string, len(e.GPUs))
	for i, g := range e.GPUs {
		ids[i] = strconv.Itoa(g)
	}
	return strings.Join(ids, ",")
}

// WriteModelTable writes the models a running daemon serves on demand as
// hearth models prints them, or says that every model has GPUs of its own.
func WriteModelTable(w io.Writer, models []adminapi.Model) error {
	if len(models) == 0 {
		_, err := fmt.Fprintln(w, "every model has GPUs of its own (models load on demand when hearth up serves more --model than its GPUs hold)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSTATE\tIN FLIGHT\tPINNED\tGPU\tSHARE\tLAST")
	for _, m := range models {
		share := "-"
		if m.Share > 0 {
			share = fmt.Sprintf("%.0f%%", m.Share*100)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\t%s\t%s\n", m.Name, m.State, m.InFlight, m.Pinned, cmp.Or(m.GPU, "-"), share, lastMove(m.Last))
	}
	return tw.Flush()
}

// lastMove says a model's latest transition in a few words: "wake
// 14:55:02, 0.9 s", "load 14:59:00, failed"; "-" for none.
func lastMove(t *adminapi.ModelTransition) string {
	if t == nil {
		return "-"
	}
	s := fmt.Sprintf("%s %s, ", t.Kind, t.At.Local().Format("15:04:05"))
	if t.Error != "" {
		return s + "failed"
	}
	return s + strconv.FormatFloat(float64(t.TookMS)/1000, 'f', 1, 64) + " s"
}
