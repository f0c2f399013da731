// Package simcli is the simulated engine's command line: the hearth binary
// answering to the real engines' names (`vllm serve MODEL [flags]`,
// `python3 -m sglang.launch_server [flags]`, `sglang serve`), as the
// simulated images run it, and the body of `hearth sim-engine`.
//
// Contract:
//   - A real engine's command line is parsed as its argparse parser does:
//     flags the simulator models set its configuration (sim.Config), the
//     other real flags are accepted and ignored, anything else is refused
//     with the engine's usage message and exit status 2.
//   - Settings no real command line has a place for (modelled GPU, speed-up,
//     seed, KV blocks, tool calls) come from the environment, as
//     runtime.ParseSimEnv reads what the Docker runtime writes.
//   - The node's SSD KV store is opened through Env.OpenStore, which the
//     caller supplies: the simulator does not own the store.
//   - RunProgram returns the process's exit status: 0 after a clean stop
//     (ctx ends), 1 when the engine fails, 2 for a refused command line.
package simcli
