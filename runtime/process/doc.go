// Package process runs an inference engine as a child process of the
// daemon: the simulated engine as `hearth sim-engine`, or a natively
// installed vLLM or SGLang (`vllm serve …`, `python3 -m
// sglang.launch_server …`) with the same arguments the Docker runtime
// gives their images, or a command the user names.
//
// Each child runs in a process group of its own, so that stopping it
// (SIGTERM, then SIGKILL after the stop context ends) reaches whatever it
// spawned, and on Linux it is killed by the kernel when the daemon dies,
// even by SIGKILL (PR_SET_PDEATHSIG), so that no engine outlives Hearth
// holding a GPU. Its stdout and stderr go to a bounded ring of lines,
// which the handle lets the supervisor follow (runtime.LogFollower).
//
// A native vLLM binds its KV-event sockets only to a wildcard address: on a
// machine with a LAN those ports are reachable from it, unlike the HTTP API,
// which binds to the launcher's host (loopback by default). The Docker
// runtime publishes all of them on loopback only.
package process
