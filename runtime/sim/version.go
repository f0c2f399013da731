package sim

import (
	"strings"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// EventFormatOf is the KV-event layout the given release of an engine kind
// publishes ("0.20.0" or "v0.33.0"), as the kind's descriptor records it
// (runtime.EngineKind.ReleaseFor): vLLM's positional events before v0.23
// and maps since, SGLang's positional events up to v0.5.19 and maps from
// v0.5.23. A version newer than every known release, or unreadable, is
// taken as the pinned one.
func EventFormatOf(kind hruntime.Kind, version string) kvevents.Format {
	if kind == "" {
		kind = hruntime.KindVLLM
	}
	rel, _ := kind.Descriptor().ReleaseFor(version)
	return rel.EventFormat
}

// VLLMEventFormat is EventFormatOf for vLLM.
func VLLMEventFormat(version string) kvevents.Format {
	return EventFormatOf(hruntime.KindVLLM, version)
}

// playedVersion is the release number an instance reports: the one it was
// told ("v" dropped), else the kind's pinned release.
func playedVersion(kind hruntime.Kind, version string) string {
	if version != "" {
		return strings.TrimPrefix(version, "v")
	}
	return kind.Descriptor().Pinned().Version
}

// namesSpecKinds reports whether the instance's events name their KV-cache
// group's kind: when the release it plays does (EngineRelease.SpecKinds)
// and it publishes in that release's layout, not one a test chose.
func namesSpecKinds(kind hruntime.Kind, version string, format kvevents.Format) bool {
	if kind == "" {
		kind = hruntime.KindVLLM
	}
	rel, _ := kind.Descriptor().ReleaseFor(version)
	return rel.SpecKinds && format == rel.EventFormat
}
