package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/kvevents"
)

// EngineRelease is what Hearth knows of one release of an engine that
// another release does not share: the facts on the wire, and the images
// the project publishes for it. An EngineKind lists the releases where a
// fact changed, newest first; a release between two of them has the older
// one's facts (ReleaseFor).
type EngineRelease struct {
	// Version is the release's number without the "v": "0.33.0".
	Version string
	// Images are the release's container images, newest CUDA first (see
	// EngineKind.Images).
	Images []Image
	// EventFormat is the wire layout of the release's KV events.
	EventFormat kvevents.Format
	// SpecKinds: the release's stored-block events name the kind of their
	// KV-cache group and its window (kv_cache_spec_kind,
	// kv_cache_spec_sliding_window), which the router prefers over taking
	// group 0 for full attention.
	SpecKinds bool
}

// releaseImages are a release's two images: both projects build their
// default tags for CUDA 13 (an R580 driver or newer) and publish CUDA 12.9
// builds under the same tag with a -cu129 suffix, which run on more
// drivers.
func releaseImages(repo, version string) []Image {
	return []Image{
		{Ref: repo + ":v" + version, MinCUDA: 13000},
		{Ref: repo + ":v" + version + "-cu129", MinCUDA: 12090},
	}
}

// Pinned is the release Hearth runs unless told otherwise: the newest it
// knows. It panics for a kind without releases, which Register refuses.
func (k *EngineKind) Pinned() EngineRelease { return k.Releases[0] }

// ReleaseFor is the release whose facts hold for version ("0.20.0",
// "v0.5.19"; "" for the pinned one): the newest listed release not newer
// than it. known is false when version is newer than every listed release,
// or unreadable: the engine is then taken to behave as the pinned release,
// and the caller says so in its log. A version older than every listed
// release gets the oldest one's facts.
func (k *EngineKind) ReleaseFor(version string) (r EngineRelease, known bool) {
	if version == "" {
		return k.Pinned(), true
	}
	v, ok := parseVersion(version)
	if !ok {
		return k.Pinned(), false
	}
	for i, rel := range k.Releases {
		rv, _ := parseVersion(rel.Version)
		switch c := compareVersions(v, rv); {
		case i == 0 && c > 0:
			return rel, false
		case c >= 0:
			return rel, true
		}
	}
	return k.Releases[len(k.Releases)-1], true
}

// ImageVersion is the release an image of the kind runs, read from its
// tag ("vllm/vllm-openai:v0.20.0-cu129" → "0.20.0"): "" when the image is
// not from the repository of the kind's pinned images (a simulated image,
// one built locally), or its tag names no version ("latest"). A digest
// (@sha256:…) names no version either.
func (k *EngineKind) ImageVersion(image string) string {
	if len(k.Releases) == 0 || strings.Contains(image, "@") {
		return ""
	}
	repo, tag, ok := splitImageTag(image)
	if !ok {
		return ""
	}
	pinnedRepo, _, _ := splitImageTag(k.Pinned().Images[0].Ref)
	if repo != pinnedRepo && !strings.HasSuffix(repo, "/"+pinnedRepo) {
		return ""
	}
	version := strings.TrimPrefix(tag, "v")
	if i := strings.IndexByte(version, '-'); i >= 0 {
		version = version[:i] // -cu129, -cu130 …
	}
	if _, ok := parseVersion(version); !ok {
		return ""
	}
	return version
}

// splitImageTag splits an image reference into its repository (registry
// included) and tag; ok is false when it has no tag.
func splitImageTag(image string) (repo, tag string, ok bool) {
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i+1:], "/") {
		return image, "", false
	}
	return image[:i], image[i+1:], true
}

// checkReleases refuses a kind whose releases are not newest first or lack
// what every release needs.
func checkReleases(k *EngineKind) error {
	var prev [3]int
	for i, rel := range k.Releases {
		v, ok := parseVersion(rel.Version)
		switch {
		case !ok:
			return fmt.Errorf("release %q is not a version", rel.Version)
		case i > 0 && compareVersions(v, prev) >= 0:
			return fmt.Errorf("release %s is listed after %d.%d.%d: newest first", rel.Version, prev[0], prev[1], prev[2])
		case len(rel.Images) == 0 && len(k.Releases[0].Images) > 0 && i == 0:
			return fmt.Errorf("pinned release %s has no images", rel.Version)
		}
		prev = v
	}
	return nil
}

// parseVersion reads "major.minor[.patch]" with an optional leading "v";
// what follows the patch number (".post1", "rc1") is ignored.
func parseVersion(s string) ([3]int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	if len(parts) < 2 {
		return [3]int{}, false
	}
	var v [3]int
	for i, p := range parts {
		if i == 2 {
			p = leadingDigits(p)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return [3]int{}, false
		}
		v[i] = n
	}
	return v, true
}

func leadingDigits(s string) string {
	for i, c := range s {
		if c < '0' || c > '9' {
			return s[:i]
		}
	}
	return s
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ReleaseAtStart is the spec as the serving engine says it runs: its
// EngineVersion the release the engine reports (EngineKind.ReadVersion),
// which decides the wire facts Hearth speaks to it by; the spec unchanged
// when the engine does not say. A version read that differs from the one
// the image's tag named is logged; one newer than any Hearth knows is
// logged by whoever speaks to the engine (Spec.Release's known).
func ReleaseAtStart(ctx context.Context, client *http.Client, baseURL string, spec Spec, log *slog.Logger) Spec {
	k, ok := Lookup(spec.Engine)
	if !ok || k.ReadVersion == nil || len(k.Releases) == 0 {
		return spec
	}
	version, ok := k.ReadVersion(ctx, client, baseURL)
	if !ok {
		return spec
	}
	version = strings.TrimPrefix(version, "v")
	if spec.EngineVersion != "" && spec.EngineVersion != version {
		log.Info("the engine reports another release than its image's tag", "tag", spec.EngineVersion, "reported", version)
	}
	spec.EngineVersion = version
	return spec
}
