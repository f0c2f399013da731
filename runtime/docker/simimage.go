package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// SimImageRepo is the repository of the simulated engines' images; the
// flavour is a suffix ("hearth/sim-vllm").
const SimImageRepo = "hearth/sim-"

// LabelBinary on a simulated image is the SHA-256 of the hearth binary in
// it: a rebuilt binary under the same version tag is told from the old one.
const LabelBinary = "hearth.binary"

// BinaryHash is the hex SHA-256 of the file at path, LabelBinary's value.
func BinaryHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SimImage names the simulated image of a flavour at a tag (Hearth's
// version): "hearth/sim-vllm:0.4.0".
func SimImage(flavor hruntime.Kind, tag string) string {
	return SimImageRepo + string(flavor) + ":" + tag
}

// simDockerfiles lay the hearth binary out as the real images lay
// out their engines: vLLM's image runs `vllm serve` as its entrypoint,
// SGLang's is given `python3 -m sglang.launch_server …` as its command. The
// binary tells which engine to be by the name it runs under.
var simDockerfiles = map[hruntime.Kind]string{
	hruntime.KindVLLM: `FROM scratch
COPY hearth /usr/local/bin/vllm
ENV PATH=/usr/local/bin:/usr/bin:/bin
LABEL ` + LabelSim + `=vllm
EXPOSE 8000
ENTRYPOINT ["vllm", "serve"]
`,
	hruntime.KindSGLang: `FROM scratch
COPY hearth /usr/bin/python3
ENV PATH=/usr/local/bin:/usr/bin:/bin
LABEL ` + LabelSim + `=sglang
EXPOSE 30000
CMD ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B-FP8"]
`,
}

// contextFile is one file of an image build's context.
type contextFile struct {
	name string
	mode int64
	data []byte
}

// BuildSimImage builds, through the Docker API, an image FROM scratch that
// holds the hearth binary at binary and runs the simulated engine in
// flavor's guise. A dynamically linked binary (the default cgo build)
// brings its interpreter and its shared libraries, read from its ELF
// headers and taken from this host, at the paths where it finds them. The
// build's output goes to out.
func BuildSimImage(ctx context.Context, docker *client.Client, binary string, flavor hruntime.Kind, image string, out io.Writer) error {
	dockerfile, ok := simDockerfiles[flavor]
	if !ok {
		return fmt.Errorf("sim image: unknown flavour %q (want vllm or sglang)", flavor)
	}
	deps, err := findRuntimeFiles(binary, hostSearch)
	if err != nil {
		return fmt.Errorf("sim image: %w", err)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("sim image: %w", err)
	}
	sum := sha256.Sum256(bin)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []contextFile{{"hearth", 0o755, bin}}
	if deps.Interpreter != "" {
		var libDirs []string
		for _, p := range append([]string{deps.Interpreter}, deps.Libraries...) {
			data, err := os.ReadFile(p) // through links: the image holds the file at the path the loader asks for
			if err != nil {
				return fmt.Errorf("sim image: %s needs %w", binary, err)
			}
			files = append(files, contextFile{"rootfs" + filepath.Clean(p), 0o755, data})
			if p != deps.Interpreter && !slices.Contains(libDirs, filepath.Dir(p)) {
				libDirs = append(libDirs, filepath.Dir(p))
			}
		}
		// The image has no ld.so.cache: the library path names the
		// directories the libraries were found in, whichever they are.
		dockerfile = strings.Replace(dockerfile, "FROM scratch\n",
			"FROM scratch\nCOPY rootfs/ /\nENV LD_LIBRARY_PATH="+strings.Join(libDirs, ":")+"\n", 1)
	}
	files = append(files, contextFile{"Dockerfile", 0o644, []byte(dockerfile)})
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := docker.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags: []string{image}, Remove: true, ForceRemove: true,
		Labels: map[string]string{LabelBinary: hex.EncodeToString(sum[:])},
	})
	if err != nil {
		return fmt.Errorf("sim image %s: %w", image, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg jsonstream.Message
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("sim image %s: reading the build: %w", image, err)
		}
		if msg.Error != nil {
			return fmt.Errorf("sim image %s: %s", image, strings.TrimSpace(msg.Error.Message))
		}
		if out != nil && msg.Stream != "" {
			io.WriteString(out, msg.Stream)
		}
	}
}
