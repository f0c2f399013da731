package sim

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// console writes an engine's own output lines the way the real engine
// formats them, so that whatever reads a real engine's log (a console
// showing load progress, a person) reads the simulated one alike.
type console struct {
	mu  sync.Mutex
	w   io.Writer   // nil: discard
	clk clock.Clock // the time in each line
	pid int
}

// vLLM's processes as its log prefixes name them.
const (
	vllmAPIServer  = "APIServer"
	vllmEngineCore = "EngineCore_DP0"
)

// vllm writes one vLLM logger line: "(APIServer pid=7) INFO 09-21
// 10:00:00 [api_server.py:1912] message".
func (c *console) vllm(proc, level, src, format string, args ...any) {
	c.line(fmt.Sprintf("(%s pid=%d) %s %s [%s] %s", proc, c.pid, level,
		c.clk.Now().Format("01-02 15:04:05"), src, fmt.Sprintf(format, args...)))
}

// vllmUvicorn writes a uvicorn line of vLLM's API server.
func (c *console) vllmUvicorn(format string, args ...any) {
	c.line(fmt.Sprintf("(%s pid=%d) INFO:     %s", vllmAPIServer, c.pid, fmt.Sprintf(format, args...)))
}

// sglang writes one SGLang logger line: "[2025-09-21 10:00:00 TP0]
// message" from the scheduler (tp), "[2025-09-21 10:00:00] message" from
// the main process.
func (c *console) sglang(tp bool, format string, args ...any) {
	tag := ""
	if tp {
		tag = " TP0"
	}
	c.line(fmt.Sprintf("[%s%s] %s", c.clk.Now().Format("2006-01-02 15:04:05"), tag, fmt.Sprintf(format, args...)))
}

// raw writes a line as is: progress bars, traceback lines.
func (c *console) raw(format string, args ...any) { c.line(fmt.Sprintf(format, args...)) }

func (c *console) line(s string) {
	if c.w == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.w, s+"\n") // a console that fails has no one to tell
}

// Progress bars as tqdm draws them.

// tqdmBar is a 10-cell bar of frac, e.g. "█████     ".
func tqdmBar(frac float64) string {
	n := min(max(int(frac*10), 0), 10)
	return strings.Repeat("█", n) + strings.Repeat(" ", 10-n)
}

// tqdmClock is tqdm's elapsed or remaining time, "01:05".
func tqdmClock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}

// tqdmTimes is "[00:03<00:09, 2.50it/s]" for done of total units after
// elapsed; unit is appended to the rate ("it/s", "B/s" scaled).
func tqdmTimes(done, total float64, elapsed time.Duration, rate string) string {
	// Under a few milliseconds (a start-up with no delay) a rate would be
	// noise in the millions; tqdm shows "?" before its first update.
	if done <= 0 || elapsed < 5*time.Millisecond {
		return fmt.Sprintf("[%s<?, ?%s]", tqdmClock(elapsed), rate)
	}
	remaining := time.Duration(float64(elapsed) * (total - done) / done)
	perSec := done / elapsed.Seconds()
	if rate == "B/s" {
		return fmt.Sprintf("[%s<%s, %sB/s]", tqdmClock(elapsed), tqdmClock(remaining), siBytes(perSec))
	}
	return fmt.Sprintf("[%s<%s, %5.2f%s]", tqdmClock(elapsed), tqdmClock(remaining), perSec, rate)
}

// siBytes is a size as huggingface_hub's bars show it: "3.96G", "330M".
func siBytes(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2fG", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.0fM", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.0fk", b/1e3)
	}
	return fmt.Sprintf("%.0f", b)
}
