package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// PullProgress is where a pull stands, summed over the image's layers.
type PullProgress struct {
	Image string
	// Layers is the number of layers seen so far; Done how many of them
	// are downloaded (or were already present).
	Layers, Done int
	// Current and Total are the bytes downloaded and to download of the
	// layers whose size is known.
	Current, Total int64
}

// Percent is the share downloaded, 0 to 100; -1 while no size is known.
func (p PullProgress) Percent() float64 {
	if p.Total <= 0 {
		return -1
	}
	return 100 * float64(p.Current) / float64(p.Total)
}

// Causes of a failed pull.
const (
	PullNotFound  = "image_not_found"
	PullNoNetwork = "no_network"
	PullAuth      = "registry_auth"
	PullOther     = "pull_failed"
)

// PullError is a pull that failed, with its cause told in one sentence.
type PullError struct {
	Image string
	Cause string // PullNotFound, PullNoNetwork, PullAuth or PullOther
	Err   error  // what Docker said
}

func (e *PullError) Error() string {
	switch e.Cause {
	case PullNotFound:
		return fmt.Sprintf("image %s does not exist in its registry: check the name and tag (--image): %v", e.Image, e.Err)
	case PullNoNetwork:
		return fmt.Sprintf("image %s is not on this machine and its registry cannot be reached: connect the machine, or load the image with `docker load`: %v", e.Image, e.Err)
	case PullAuth:
		return fmt.Sprintf("the registry refused image %s: if it is private, run `docker login` for its registry; else check the name: %v", e.Image, e.Err)
	}
	return fmt.Sprintf("pulling image %s: %v", e.Image, e.Err)
}

func (e *PullError) Unwrap() error { return e.Err }

// classifyPull tells a missing image from an unreachable registry and from
// a refusal, by what the daemon wrote: its errors arrive as text, in the
// HTTP reply or in the stream's errorDetail.
func classifyPull(image string, err error) *PullError {
	msg := strings.ToLower(err.Error())
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	cause := PullOther
	switch {
	case has("no such host", "i/o timeout", "connection refused", "network is unreachable",
		"tls handshake timeout", "no route to host", "temporary failure in name resolution",
		"connection reset", "server misbehaving"):
		cause = PullNoNetwork
	case has("manifest unknown", "not found", "name unknown"):
		cause = PullNotFound
	case has("unauthorized", "authentication required", "denied", "no basic auth credentials", "forbidden"):
		// Docker Hub answers "pull access denied ... repository does not
		// exist or may require 'docker login'" for both: the sentence
		// names both.
		cause = PullAuth
	}
	return &PullError{Image: image, Cause: cause, Err: err}
}

// pull fetches image, reporting progress after each message of the
// daemon's stream.
func pull(ctx context.Context, cli *client.Client, image string, progress func(PullProgress)) error {
	resp, err := cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return classifyPull(image, err)
	}
	defer resp.Close()
	var t pullTracker
	t.image = image
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return classifyPull(image, err)
		}
		if msg.Error != nil {
			return classifyPull(image, errors.New(msg.Error.Message))
		}
		if t.add(msg) && progress != nil {
			progress(t.progress())
		}
	}
	return nil
}

// pullTracker sums a pull's per-layer messages.
type pullTracker struct {
	image  string
	order  []string
	layers map[string]*layerState
}

type layerState struct {
	current, total int64
	done           bool
}

// add takes one message of the stream and reports whether it changed the
// progress.
func (t *pullTracker) add(msg jsonstream.Message) bool {
	if msg.ID == "" || strings.HasPrefix(msg.Status, "Pulling from") || strings.HasPrefix(msg.Status, "Digest") {
		return false
	}
	if t.layers == nil {
		t.layers = map[string]*layerState{}
	}
	l, ok := t.layers[msg.ID]
	if !ok {
		l = &layerState{}
		t.layers[msg.ID] = l
		t.order = append(t.order, msg.ID)
	}
	switch msg.Status {
	case "Downloading":
		if msg.Progress != nil {
			l.current, l.total = msg.Progress.Current, msg.Progress.Total
		}
	case "Download complete", "Pull complete", "Already exists", "Verifying Checksum", "Extracting":
		l.done = true
		if l.total > 0 {
			l.current = l.total
		}
	}
	return true
}

func (t *pullTracker) progress() PullProgress {
	p := PullProgress{Image: t.image, Layers: len(t.order)}
	for _, id := range t.order {
		l := t.layers[id]
		if l.done {
			p.Done++
		}
		p.Current += l.current
		p.Total += l.total
	}
	return p
}
