package docker_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// localRegistry serves an OCI registry on loopback, which the Docker Engine
// pulls from over plain HTTP (127.0.0.0/8 is an insecure registry by
// default). With a password set it refuses requests without it.
func localRegistry(t *testing.T, password string) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, _ := r.BasicAuth(); password != "" && pw != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="hearth-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestPullFromARegistry pulls for real: a three-layer image pushed to a
// registry on loopback arrives with its progress reported layer by layer; a
// missing tag and a refused login are told apart.
func TestPullFromARegistry(t *testing.T) {
	cli := dockertest.Client(t)
	host := localRegistry(t, "")
	image := host + "/hearth-test/pull:" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	img, err := random.Image(256<<10, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push to the test registry: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() { cli.ImageRemove(context.Background(), image, client.ImageRemoveOptions{Force: true}) })

	var last docker.PullProgress
	reports := 0
	if err := docker.Pull(ctx, cli, image, func(p docker.PullProgress) { last = p; reports++ }); err != nil {
		t.Fatalf("pull: %v", err)
	}
	if reports < 3 || last.Layers != 3 || last.Done != 3 {
		t.Errorf("progress: %d reports, last %+v; want every layer seen and done", reports, last)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		t.Errorf("pulled image not on the engine: %v", err)
	}

	err = docker.Pull(ctx, cli, host+"/hearth-test/pull:no-such-tag", nil)
	var pe *docker.PullError
	if !errors.As(err, &pe) || pe.Cause != docker.PullNotFound {
		t.Errorf("pull of a missing tag = %v, want %s", err, docker.PullNotFound)
	}

	locked := localRegistry(t, "secret")
	err = docker.Pull(ctx, cli, locked+"/hearth-test/pull:1", nil)
	if !errors.As(err, &pe) || pe.Cause != docker.PullAuth {
		t.Errorf("pull without credentials = %v, want %s", err, docker.PullAuth)
	}
}
