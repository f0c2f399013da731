// Package docker runs inference engines as containers of the local Docker
// Engine, through the Docker API (github.com/moby/moby/client): the vLLM
// and SGLang images for real GPUs, or Hearth's simulated images, which take
// the same command lines.
//
// Launcher implements runtime.Launcher. Launch:
//   - makes sure the image is present, pulling it with per-layer progress
//     (Launcher.Progress); a failed pull is a *PullError that tells a
//     missing image from an unreachable registry and from a refusal;
//   - builds the container: the engine's own command line (its kind's
//     runtime.EngineKind.ImageCommand, on the kind's ImageHTTPPort), the GPU by device request (UUID),
//     IpcMode host, the Hugging Face cache mounted, PYTHONHASHSEED=0 and
//     HF_TOKEN, no restart policy (the supervisor restarts), and the labels
//     hearth.node, hearth.engine, hearth.gpu, hearth.model and
//     hearth.config, a hash of everything the container runs but the token;
//   - adopts the engine's container when it already runs with the same
//     hash (no reload of the weights), and removes it otherwise;
//   - publishes the engine's ports on loopback ports only, trying new ones
//     when another program takes one first; on any error it leaves no
//     container behind.
//
// A Handle follows the container's log into a ring, reports its exit (with
// the kernel's OOM kill), stops it with SIGTERM and a grace period before
// Docker kills it, then removes it; Detach lets go of it running, for a
// daemon that stops with --keep-engines. When the Docker Engine restarts
// under a running engine, the handle reports the engine gone and the
// supervisor's next start adopts the container if it survived.
// RemoveStale removes a node's containers the plan no longer names.
//
// BuildSimImage builds an image FROM scratch around a hearth binary (with
// its ELF interpreter and shared libraries when it is dynamically linked),
// laid out as the vLLM or SGLang image (LabelSim marks it), so that tests
// and users without GPUs run the same launch path as with real engines.
package docker
