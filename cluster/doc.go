// Package cluster joins Hearth nodes into one cluster: its identity (a
// cluster CA, node certificates, join tokens and the revocation list), the
// cluster plane (an embedded NATS server per node, routed to its peers over
// mutual TLS, carrying heartbeats with each node's inventory, revocations,
// every engine's registration, state and KV events, and each node's router
// load on every engine), the membership table that judges peers up,
// suspect or down by the local receive times of their heartbeats, the
// authenticated proxy through which a node's router reaches a peer's
// loopback-only engines, and mDNS announcement and discovery of peers.
//
// It exists apart from cmd so that all of this can be tested without a
// daemon: several Nodes run in one test process over loopback. It knows the
// router only as the place where remote engines become workers and where
// their relayed KV events are ingested; it never makes routing decisions.
//
// Security model: every node-to-node connection (NATS routes, the engine
// proxy) is TLS 1.3 with certificates of the cluster CA on both sides, and a
// certificate whose serial is on the revocation list is refused during the
// handshake. The join secret only ever travels inside a TLS connection whose
// server proved it holds a certificate of the CA named by the token's
// fingerprint. A node may also ask to join without a token (ask.go): it
// trusts the CA the inviter presents on first use, and the owner accepts it
// on the inviter only after comparing a six-digit code shown on both
// machines, derived from that CA's fingerprint, the joiner's key, the
// request id and a nonce the joiner committed to first; nothing is signed
// before the owner accepts, and pending requests live in memory only.
package cluster
