// Package kvbm is the tiered KV block manager: host-RAM and SSD tiers beneath
// the engines' GPU caches, the catalog of where each block lives, and the
// eviction policy between tiers.
//
// It must not route requests or know about client protocols. It imports
// only kvevents, whose events tell it where engines hold blocks.
package kvbm
