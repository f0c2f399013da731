package docker

import (
	"fmt"
	"slices"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// DefaultImage is the image of an engine kind for a driver whose CUDA
// version NVML reports as cudaVersion (12090 for 12.9; 0 when unknown): the
// kind's newest image the driver runs, else (a driver Hearth could not ask)
// the one that runs on most drivers. The kinds pin their images
// (EngineKind.Images), so that a restart runs what was tested.
func DefaultImage(kind hruntime.Kind, cudaVersion int) (string, error) {
	if k, ok := hruntime.Lookup(kind); ok {
		if image, ok := k.Image(cudaVersion); ok {
			return image, nil
		}
	}
	return "", fmt.Errorf("docker: no image for engine %q (known: %s)", kind, hruntime.KindNames())
}

// RequiredCUDA is the oldest CUDA version (NVML's encoding) a driver must
// run for image, 0 for an image of no release a kind lists.
func RequiredCUDA(image string) int {
	for _, k := range hruntime.Kinds() {
		images := slices.Clone(k.Images)
		for _, rel := range k.Releases {
			images = append(images, rel.Images...)
		}
		for _, img := range images {
			if img.Ref == image {
				return img.MinCUDA
			}
		}
	}
	return 0
}
