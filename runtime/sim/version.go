package sim

import (
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/kvevents"
)

// vllmFirstMapEvents is the first vLLM release whose KV events are maps
// tagged "type": up to v0.22 vllm/distributed/kv_events.py declares its
// event classes with msgspec's array_like, so they go out as positional
// arrays whose first element is the class name; the indexed later version
// of the file (commit not named) declares them without it, as maps.
var vllmFirstMapEvents = [2]int{0, 23}

// VLLMEventFormat is the KV-event layout the given vLLM release publishes
// ("0.20.0" or "v0.33.0"): positional events before v0.23, map events
// since. A version it cannot read is taken as a newer one.
func VLLMEventFormat(version string) kvevents.Format {
	v, ok := parseMinor(version)
	if ok && (v[0] < vllmFirstMapEvents[0] || v[0] == vllmFirstMapEvents[0] && v[1] < vllmFirstMapEvents[1]) {
		return kvevents.FormatArray
	}
	return kvevents.FormatMap
}

// parseMinor reads the major and minor numbers of a release version.
func parseMinor(version string) ([2]int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return [2]int{}, false
	}
	return [2]int{major, minor}, true
}
