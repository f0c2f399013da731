// Package kvtier names the levels a KV block can live in (GPU, host RAM,
// the node's SSD) and maps the storage medium of an engine's KV event to
// one of them (Of).
//
// It is a leaf of its own so that the router, its event ingest and the
// cluster's relay can speak of tiers without importing kvbm, the node's
// block store: deciding where a request goes needs the name of a tier,
// not the code that keeps blocks on disk. It imports only kvevents, for
// the media engines write.
package kvtier
