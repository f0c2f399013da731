// Package daemon is hearth up: its configuration and the composition of
// Hearth's packages into one serving daemon.
//
// The configuration is defined here once, for hearth up, hearth config
// (which prints it), hearth install (which writes it as a file) and
// hearth upgrade (which reads the installed one): RegisterFlags defines
// every flag with its default, Flags.Parse reads the command line, then
// the HEARTH_* variables and the configuration file, into a Config;
// Config.Complete fills in what the flags leave to be worked out (the
// engine runtime --sim implies, the default model, the data directory and
// KV store, the server's keys of its own variable) and Validate checks it.
// A new flag is one line in RegisterFlags, its default worked out in
// Complete where it depends on others, and its check in Validate. DataDir
// names every path under the data directory, for the daemon and for the
// commands that read its state.
//
// Run builds the daemon in stage functions (GPUs and plan, state, KV
// store, routing, cluster, engines, API and console), each taking what it
// needs and returning a small struct, what each opened on one cleanup
// stack, and serves in one errgroup until its context ends. Options
// change where parts come from and how fast they tick, for tests. The
// console reads the daemon through the adapters here (engines, router,
// traffic, keys, settings, health, node store, cluster), each behind an
// interface the console declares; NewDoctor builds hearth doctor's checks
// for the command and for the console's Health page alike.
//
// The command line reaches a running daemon through localclient.go and
// served.go: the admin API's client (AdminClient), and for hearth launch
// the daemon's address (DaemonAddr, from the file Run writes under the data
// directory, DataDir.LocalAddr) and what its API serves (AskServed: the
// models and served context of GET /v1/models, as agentclient tells the
// coding agents; hearth up prints the same settings when its engines
// settle).
//
// With more models than GPU groups (residency.go), each group's models
// are held by a models.Manager, which decides what is resident; the
// daemon gives it the engines' moves (the supervisor's hold and release,
// the engines' sleep endpoints, the GPU telemetry) and asks it before
// routing a request.
//
// It owns no concept of its own beyond that wiring and its configuration:
// engine planning and the layout recommender are catalog's (hearth up
// --agent hands ChooseAgentLayout the evaluator the planner declares),
// the node store kvbm's, engines runtime's. Only cmd imports it. The
// /api/v1 endpoints are adminapi's; the daemon mounts them with adapters
// that read its engines, traffic and cluster node.
package daemon
