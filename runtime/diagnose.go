package runtime

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Cause names a known way for an engine to fail, for programs (the API's
// "cause"); Diagnosis.Message says it for people.
type Cause string

// The causes Diagnose knows.
const (
	// CauseOutOfMemory: the model, its KV cache or its CUDA graphs do not
	// fit the GPU's memory, or another program holds that memory.
	CauseOutOfMemory Cause = "out_of_memory"
	// CauseGatedModel: the model is gated on Hugging Face and HF_TOKEN is
	// missing or has no access to it.
	CauseGatedModel Cause = "gated_model"
	// CauseModelNotFound: no such model on Hugging Face (or a private one
	// without a token).
	CauseModelNotFound Cause = "model_not_found"
	// CauseDriverTooOld: the NVIDIA driver is older than the CUDA the
	// engine (its image) was built for.
	CauseDriverTooOld Cause = "driver_too_old"
	// CauseNoNVIDIARuntime: Docker cannot hand GPUs to containers.
	CauseNoNVIDIARuntime Cause = "no_nvidia_runtime"
	// CausePortInUse: a port the engine binds is taken.
	CausePortInUse Cause = "port_in_use"
	// CauseDiskFull: no space left for the weights or the image.
	CauseDiskFull Cause = "disk_full"
	// CauseHostMemory: the engine's host-RAM KV tier does not fit the
	// host memory available (SGLang refuses it at start).
	CauseHostMemory Cause = "host_memory"
)

// Diagnosis is why an engine failed, when Hearth recognises it.
type Diagnosis struct {
	Cause Cause
	// Message is one sentence: what went wrong, with figures from the log
	// where it gives them, and the fix.
	Message string
}

// Diagnose looks for a known cause of failure in err (a launcher's error,
// such as the Docker API's, which may span lines) and then in an engine's
// log lines, newest first: the last error an engine prints is the one that
// ended it. It returns false when it recognises nothing.
func Diagnose(lines []string, err error) (Diagnosis, bool) {
	if err != nil {
		errLines := strings.Split(err.Error(), "\n")
		for i := range errLines {
			if d, ok := diagnoseLine(errLines, i); ok {
				return d, true
			}
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if d, ok := diagnoseLine(lines, i); ok {
			return d, true
		}
	}
	return Diagnosis{}, false
}

// diagnoseLine tries every known cause on lines[i]; the lines around it
// may complete the picture (the model name of a Hugging Face error, the
// phase an out-of-memory error struck in).
func diagnoseLine(lines []string, i int) (Diagnosis, bool) {
	line := lines[i]
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	lower := strings.ToLower(line)
	for _, m := range matchers {
		if d, ok := m(lines, i, line, lower); ok {
			return d, true
		}
	}
	return Diagnosis{}, false
}

// A matcher recognises one cause in line (lower is it in lower case).
type matcher func(lines []string, i int, line, lower string) (Diagnosis, bool)

// matchers run in order: the specific before the general (a gated model's
// error mentions a 401, as a missing one's may).
var matchers = []matcher{noNVIDIARuntime, driverTooOld, outOfMemory, hostMemory, gatedModel, modelNotFound, portInUse, diskFull}

var (
	cudaNeededRE    = regexp.MustCompile(`cuda>=(\d+)\.(\d+)`)
	driverFoundRE   = regexp.MustCompile(`too old \(found version (\d+)\)`)
	kvNeedRE        = regexp.MustCompile(`max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory \(([\d.]+) GiB\)`)
	kvEstimateRE    = regexp.MustCompile(`estimated maximum model length is (\d+)`)
	kvTokensRE      = regexp.MustCompile(`max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((\d+)\)`)
	freeMemRE       = regexp.MustCompile(`Free memory on device[^(]*\(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory utilization \(([\d.]+)`)
	triedAllocRE    = regexp.MustCompile(`Tried to allocate ([\d.]+ [KMGT]iB)`)
	capacityRE      = regexp.MustCompile(`total capacity of ([\d.]+ [KMGT]iB) of which ([\d.]+ [KMGT]iB) is free`)
	gatedModelRE    = regexp.MustCompile(`Access to model (\S+?) is restricted`)
	hubRepoURLRE    = regexp.MustCompile(`huggingface\.co/(?:api/models/)?([\w.-]+/[\w.-]+?)(?:/|\.?\s|\.?$)`)
	notValidModelRE = regexp.MustCompile(`(\S+) is not a local folder and is not a valid model identifier`)
	invalidRepoRE   = regexp.MustCompile(`Invalid repository ID or local directory specified: '([^']+)'`)
	portTupleRE     = regexp.MustCompile(`\(\s*'[^']*',\s*(\d+)\s*\)`)
	portColonRE     = regexp.MustCompile(`:(\d{1,5})(?: failed: port is already allocated|: bind: address already in use)`)
	portZMQRE       = regexp.MustCompile(`tcp://[^\s:'"]+:(\d{1,5})`)
	noSpacePathRE   = regexp.MustCompile(`[Nn]o space left on device: '([^']+)'`)
	hostPoolRE      = regexp.MustCompile(`Requesting ([\d.]+) GB but only have (-?[\d.]+) GB free`)
)

func noNVIDIARuntime(_ []string, _ int, line, lower string) (Diagnosis, bool) {
	if strings.Contains(lower, "could not select device driver") ||
		strings.Contains(lower, "unknown or invalid runtime name: nvidia") ||
		strings.Contains(lower, "unresolvable cdi devices nvidia.com/gpu") {
		return Diagnosis{CauseNoNVIDIARuntime, "Docker cannot give the container a GPU (no NVIDIA runtime): install the NVIDIA Container Toolkit; `hearth doctor` tells how"}, true
	}
	return Diagnosis{}, false
}

// minDriver is the oldest Linux driver branch for each CUDA minor version
// Hearth's images are built for.
var minDriver = map[[2]int]string{
	{12, 4}: "R550", {12, 6}: "R560", {12, 8}: "R570", {12, 9}: "R575", {13, 0}: "R580", {13, 1}: "R580",
}

func driverTooOld(_ []string, _ int, line, lower string) (Diagnosis, bool) {
	if !strings.Contains(lower, "cuda driver version is insufficient") &&
		!strings.Contains(lower, "unsatisfied condition: cuda>=") &&
		!strings.Contains(lower, "forward compatibility was attempted on non supported hw") &&
		!strings.Contains(lower, "nvidia driver on your system is too old") {
		return Diagnosis{}, false
	}
	msg := "the NVIDIA driver is older than the CUDA this engine was built for: use an image tag built for an older CUDA (the -cu129 tags) or update the driver"
	if m := cudaNeededRE.FindStringSubmatch(lower); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		need := minDriver[[2]int{major, minor}]
		switch {
		case major >= 13:
			msg = fmt.Sprintf("the NVIDIA driver is too old for this image's CUDA %d.%d: use an image tag built for CUDA 12.9 (the -cu129 tags) or update the driver", major, minor)
			if need != "" {
				msg += " to " + need + " or newer"
			}
		default:
			msg = fmt.Sprintf("the NVIDIA driver is too old for this image's CUDA %d.%d: update the driver", major, minor)
			if need != "" {
				msg += " to " + need + " or newer"
			}
			msg += ", or use an image tag built for an older CUDA"
		}
	} else if m := driverFoundRE.FindStringSubmatch(line); m != nil {
		// PyTorch's figure is CUDA's: 12020 is CUDA 12.2.
		v, _ := strconv.Atoi(m[1])
		msg = fmt.Sprintf("the NVIDIA driver supports only CUDA %d.%d, older than this engine was built for: use an image tag built for an older CUDA (the -cu129 tags) or update the driver", v/1000, v%1000/10)
	}
	return Diagnosis{CauseDriverTooOld, msg}, true
}

func outOfMemory(lines []string, i int, line, lower string) (Diagnosis, bool) {
	const fix = "lower --max-model-len or use a smaller model"
	switch {
	case strings.Contains(line, "KV cache is needed, which is larger than the available KV cache memory"):
		msg := "the KV cache for one request of the full context does not fit the GPU memory left after the weights: " + fix
		if m := kvNeedRE.FindStringSubmatch(line); m != nil {
			msg = fmt.Sprintf("a context of %s tokens needs %s GiB of KV cache but only %s GiB of GPU memory is left after the weights: ", m[1], m[2], m[3])
			if e := kvEstimateRE.FindStringSubmatch(line); e != nil && e[1] != "0" {
				msg += fmt.Sprintf("lower --max-model-len to %s or less, or use a smaller model", e[1])
			} else {
				msg += fix
			}
		}
		return Diagnosis{CauseOutOfMemory, msg}, true
	case strings.Contains(line, "is larger than the maximum number of tokens that can be stored in KV cache"):
		msg := "the KV cache holds fewer tokens than the model's context: " + fix
		if m := kvTokensRE.FindStringSubmatch(line); m != nil {
			msg = fmt.Sprintf("the KV cache holds only %s tokens, fewer than the context of %s: lower --max-model-len to %s or less, or use a smaller model", m[2], m[1], m[2])
		}
		return Diagnosis{CauseOutOfMemory, msg}, true
	case strings.Contains(line, "No available memory for the cache blocks"),
		strings.Contains(line, "Not enough memory. Please try to increase --mem-fraction-static"),
		strings.Contains(line, "Not enought memory"):
		return Diagnosis{CauseOutOfMemory, "the model's weights leave no GPU memory for the KV cache: use a smaller model (or a quantized one, FP8 or AWQ) or a GPU with more memory"}, true
	case strings.Contains(line, "on startup is less than desired GPU memory utilization"):
		msg := "another program holds part of the GPU's memory: stop it (nvidia-smi lists them) or lower --gpu-memory-utilization"
		if m := freeMemRE.FindStringSubmatch(line); m != nil {
			free, _ := strconv.ParseFloat(m[1], 64)
			total, _ := strconv.ParseFloat(m[2], 64)
			msg = fmt.Sprintf("only %s of the GPU's %s GiB is free, less than the engine's %s share: stop the other programs using the GPU (nvidia-smi lists them)", m[1], m[2], m[3])
			if total > 0 && free > 0 {
				msg += fmt.Sprintf(" or lower --gpu-memory-utilization below %.2f", free/total)
			}
		}
		return Diagnosis{CauseOutOfMemory, msg}, true
	case strings.Contains(lower, "cuda out of memory"),
		strings.Contains(line, "OutOfMemoryError"),
		strings.Contains(lower, "cuda error: out of memory"),
		strings.Contains(line, "cudaErrorMemoryAllocation"):
		msg := "CUDA ran out of memory"
		// The phase the start had reached says what did not fit.
		if st := ParseLoad(lines[:i]); st.Phase != "" && st.Phase != PhaseReady {
			msg += " while " + st.Phase.Label()
		}
		var figures []string
		if m := triedAllocRE.FindStringSubmatch(line); m != nil {
			figures = append(figures, "it needed "+m[1]+" more")
		}
		if m := capacityRE.FindStringSubmatch(line); m != nil {
			figures = append(figures, m[2]+" of "+m[1]+" was free")
		}
		if len(figures) > 0 {
			msg += " (" + strings.Join(figures, ", ") + ")"
		}
		return Diagnosis{CauseOutOfMemory, msg + ": " + fix}, true
	}
	return Diagnosis{}, false
}

// hostMemory recognises SGLang's refusal of a host KV pool (HiCache) larger
// than the host memory available less the 10 GiB it keeps free
// (HostKVCache, python/sglang/srt/mem_cache/pool_host/base.py).
func hostMemory(_ []string, _ int, line, _ string) (Diagnosis, bool) {
	if !strings.Contains(line, "Not enough host memory available") {
		return Diagnosis{}, false
	}
	const fix = "lower --kv-offloading-size or free host memory"
	if m := hostPoolRE.FindStringSubmatch(line); m != nil {
		return Diagnosis{CauseHostMemory, fmt.Sprintf("SGLang's host KV tier of %s GB per rank does not fit the host memory it may take "+
			"(%s GB, what is available less the 10 GiB it keeps free): %s", m[1], m[2], fix)}, true
	}
	return Diagnosis{CauseHostMemory, "SGLang's host KV tier does not fit the host memory available less the 10 GiB it keeps free: " + fix}, true
}

func gatedModel(lines []string, i int, line, lower string) (Diagnosis, bool) {
	if !strings.Contains(line, "GatedRepoError") &&
		!strings.Contains(lower, "cannot access gated repo") &&
		!strings.Contains(lower, "you are trying to access a gated repo") &&
		!gatedModelRE.MatchString(line) {
		return Diagnosis{}, false
	}
	repo := repoNear(lines, i)
	denied := false // a token was given but has no access
	for j := max(0, i-4); j <= min(len(lines)-1, i+4); j++ {
		if strings.Contains(lines[j], "not in the authorized list") {
			denied = true
		}
	}
	switch {
	case repo != "" && denied:
		return Diagnosis{CauseGatedModel, fmt.Sprintf("HF_TOKEN has no access to the gated model %s: ask for access at https://huggingface.co/%s, or set HF_TOKEN to a token with access to it", repo, repo)}, true
	case repo != "":
		return Diagnosis{CauseGatedModel, fmt.Sprintf("%s is a gated model: set HF_TOKEN to a token with access to it (ask for access at https://huggingface.co/%s)", repo, repo)}, true
	}
	return Diagnosis{CauseGatedModel, "the model is gated on Hugging Face: set HF_TOKEN to a token with access to it (ask for access on the model's page)"}, true
}

func modelNotFound(lines []string, i int, line, lower string) (Diagnosis, bool) {
	var repo string
	switch {
	case strings.Contains(line, "RepositoryNotFoundError"), strings.Contains(line, "Repository Not Found for url"):
		repo = repoNear(lines, i)
	case notValidModelRE.MatchString(line):
		repo = notValidModelRE.FindStringSubmatch(line)[1]
	case invalidRepoRE.MatchString(line):
		repo = invalidRepoRE.FindStringSubmatch(line)[1]
	case strings.Contains(line, "404 Client Error") && strings.Contains(line, "huggingface.co"):
		repo = repoNear(lines, i)
	default:
		return Diagnosis{}, false
	}
	if repo == "" {
		return Diagnosis{CauseModelNotFound, "the model was not found on Hugging Face: check its name (a private model also needs HF_TOKEN)"}, true
	}
	return Diagnosis{CauseModelNotFound, fmt.Sprintf("no model %s on Hugging Face: check its name (a private model also needs HF_TOKEN)", repo)}, true
}

// repoNear finds the Hugging Face repository a Hub error names, on its
// line or the few around it (the error spans lines).
func repoNear(lines []string, i int) string {
	for _, j := range []int{i, i - 1, i + 1, i - 2, i + 2, i - 3, i + 3} {
		if j < 0 || j >= len(lines) {
			continue
		}
		if m := gatedModelRE.FindStringSubmatch(lines[j]); m != nil {
			return m[1]
		}
		if m := hubRepoURLRE.FindStringSubmatch(lines[j]); m != nil && !strings.HasPrefix(m[1], "docs/") {
			return m[1]
		}
	}
	return ""
}

func portInUse(_ []string, _ int, line, lower string) (Diagnosis, bool) {
	if !strings.Contains(lower, "address already in use") &&
		!strings.Contains(line, "[Errno 98]") &&
		!strings.Contains(lower, "port is already allocated") {
		return Diagnosis{}, false
	}
	port := ""
	for _, re := range []*regexp.Regexp{portTupleRE, portColonRE, portZMQRE} {
		if m := re.FindStringSubmatch(line); m != nil {
			port = m[1]
			break
		}
	}
	if port == "" {
		return Diagnosis{CausePortInUse, "a port the engine needs is already in use: stop the program listening on it (`ss -ltnp` lists them)"}, true
	}
	return Diagnosis{CausePortInUse, fmt.Sprintf("port %s is already in use: stop the program listening on it (`ss -ltnp 'sport = :%s'` names it)", port, port)}, true
}

func diskFull(_ []string, _ int, line, lower string) (Diagnosis, bool) {
	if !strings.Contains(lower, "no space left on device") {
		return Diagnosis{}, false
	}
	if m := noSpacePathRE.FindStringSubmatch(line); m != nil {
		return Diagnosis{CauseDiskFull, fmt.Sprintf("the disk is full (writing %s): free space on it, or move the Hugging Face cache (HF_HOME) to a bigger disk", m[1])}, true
	}
	return Diagnosis{CauseDiskFull, "the disk is full: free space where the Hugging Face cache (HF_HOME) and Docker's images are kept"}, true
}
