// Package pki holds what Hearth's two certificate authorities share: the
// node's own CA for `hearth up --tls auto` (tlsca) and the cluster CA
// (cluster). Each of them decides what it issues and for how long; this
// package only makes keys, serial numbers and the CA certificate itself
// (NewCA: one template, so that the two CAs cannot drift apart in what a
// CA certificate says), encodes and decodes PEM, and keeps files on disk.
//
// It is a package of its own, not a part of tlsca, because the two CAs
// must not depend on each other: the cluster's trust is not the HTTPS
// listener's, and a change to one must not move the other. Both import
// this leaf instead of keeping copies of the same helpers.
//
// Contract for files: WriteSet replaces several files as one (a CA's
// certificate and key, a node's certificate and key): it stages every
// file (each written by atomicfile.Write), then commits by writing a
// journal naming them, then renames them into place. Recover, which every
// reader of a set calls first, finishes a committed set or drops an
// uncommitted one, so that a crash at any point leaves either the whole
// old set or the whole new set, never a key that does not match its
// certificate. Key files are written 0600. One file alone is replaced
// with atomicfile.Write.
//
// It imports nothing from Hearth but the leaf atomicfile, and never
// listens or speaks a protocol.
package pki
