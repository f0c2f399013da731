package docker

import (
	"fmt"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The engine images Hearth runs by default, pinned so that a restart runs
// what was tested. Both projects build their default tags for CUDA 13 (an
// R580 driver or newer) and publish CUDA 12.9 builds with a -cu129 suffix.
const (
	vllmImage    = "vllm/vllm-openai:v0.20.0"
	sglangImage  = "lmsysorg/sglang:v0.5.19"
	cuda12Suffix = "-cu129"
	cuda13       = 13000 // NVML's encoding of CUDA 13.0
	cuda129      = 12090
)

// DefaultImage is the image of an engine kind for a driver whose CUDA
// version NVML reports as cudaVersion (12090 for 12.9; 0 when unknown). A
// driver older than CUDA 13, or one Hearth could not ask, gets the CUDA 12.9
// build, which runs on more drivers.
func DefaultImage(kind hruntime.Kind, cudaVersion int) (string, error) {
	var image string
	switch kind {
	case hruntime.KindVLLM:
		image = vllmImage
	case hruntime.KindSGLang:
		image = sglangImage
	default:
		return "", fmt.Errorf("docker: no image for engine %q (want vllm or sglang)", kind)
	}
	if cudaVersion < cuda13 {
		image += cuda12Suffix
	}
	return image, nil
}

// RequiredCUDA is the oldest CUDA version (NVML's encoding) a driver must
// run for image: 12.9 for the -cu129 builds, 13.0 for the pinned default
// tags, 0 for an image Hearth does not know.
func RequiredCUDA(image string) int {
	switch {
	case image == vllmImage+cuda12Suffix || image == sglangImage+cuda12Suffix:
		return cuda129
	case image == vllmImage || image == sglangImage:
		return cuda13
	}
	return 0
}
