package console

import (
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"
)

// noValue stands for a figure that cannot be computed yet.
const noValue = "–"

func fmtPct(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return noValue
	}
	return strconv.Itoa(int(math.Round(f*100))) + "%"
}

// fmtRate formats a per-second rate with enough digits to be useful for
// small numbers and no noise for large ones.
func fmtRate(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return noValue
	case f == 0:
		return "0"
	case f < 10:
		return strconv.FormatFloat(f, 'f', 2, 64)
	case f < 100:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 0, 64)
}

// fmtLatency formats a latency for a person: "340 ms", "2.4 s".
func fmtLatency(d time.Duration) string {
	switch {
	case d <= 0:
		return noValue
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

// fmtSeconds formats an amount of saved time.
func fmtSeconds(s float64) string {
	switch {
	case s < 0.05:
		return "0 s"
	case s < 10:
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	case s < 600:
		return strconv.FormatFloat(s, 'f', 0, 64) + " s"
	}
	return strconv.FormatFloat(s/60, 'f', 1, 64) + " min"
}

// fmtTokens formats a token count: 812, 48.2k, 1.3M.
func fmtTokens(n int) string {
	switch {
	case n < 1000:
		return strconv.Itoa(n)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

func fmtGiB(b uint64) string {
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64)
}

// fmtWatts formats a power figure to the watt: "312 W".
func fmtWatts(w float64) string {
	return strconv.FormatFloat(math.Round(w), 'f', 0, 64) + " W"
}

// fmtAgo formats how long ago something happened, coarsely, so that a
// pushed page does not change every second for nothing.
func fmtAgo(d time.Duration) string {
	switch {
	case d < 5*time.Second:
		return "active"
	case d < time.Minute:
		return strconv.Itoa(int(d/(5*time.Second))*5) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + " d"
}

// fmtSVG formats a view-box coordinate.
func fmtSVG(f float64) string {
	return string(appendSVG(nil, f))
}

// appendSVG appends a view-box coordinate, to a tenth of a unit. It counts
// in tenths with integers: a page has thousands of sparkline points, and
// shortest-float formatting was most of its render time.
func appendSVG(b []byte, f float64) []byte {
	tenths := math.Round(f * 10)
	if !(math.Abs(tenths) < 1e15) { // NaN, ±Inf and the absurdly large
		return strconv.AppendFloat(b, tenths/10, 'f', -1, 64)
	}
	n := int64(tenths)
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = strconv.AppendInt(b, n/10, 10)
	if d := n % 10; d != 0 {
		b = append(b, '.', byte('0'+d))
	}
	return b
}

// domID makes an element id from a name that may hold anything: the
// readable part for people, a hash so that two names never share an id.
func domID(prefix, name string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + 9)
	b.WriteString(prefix)
	for _, r := range name {
		if b.Len() >= len(prefix)+40 {
			break
		}
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	b.WriteByte('-')
	b.WriteString(strconv.FormatUint(uint64(h.Sum32()), 36))
	return b.String()
}

// fmtBytes formats a size in binary units: "512 B", "3.4 MiB", "1.2 TiB".
func fmtBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for ; math.Abs(b) >= 1024 && i < len(units)-1; i++ {
		b /= 1024
	}
	if i == 0 {
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

// fmtByteRate formats bytes per second: "240.0 MiB/s", "–" when unknown.
func fmtByteRate(b float64) string {
	if math.IsNaN(b) || math.IsInf(b, 0) {
		return noValue
	}
	return fmtBytes(b) + "/s"
}
