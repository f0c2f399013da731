// Package daemon is hearth up: the composition of Hearth's packages into
// one serving daemon. Run builds it in stages (GPUs and plan, store,
// routing, cluster, engines, API and console), each stage's resources on
// one cleanup stack, and serves until its context ends.
//
// Config is the command line once parsed (cmd/hearth fills it from flags
// and the configuration file and checks it with Validate); Options change
// where parts come from and how fast they tick, for tests. The console
// reads the daemon through the adapters here (engines, router, traffic,
// keys, settings, health, node store, cluster), each behind an interface
// the console declares.
//
// It owns no concept of its own beyond that wiring: engine planning is
// catalog's, the node store kvbm's, engines runtime's. Only cmd imports
// it. The /api/v1 endpoints are adminapi's; the daemon mounts them with
// adapters that read its engines, traffic and cluster node.
package daemon
