// Package atomicfile replaces a file so that a reader sees the old
// contents or the new, never part of either, and so that the new contents
// survive a crash once Write has returned: the data goes to a temporary
// file in the same directory, which is given its mode, written, synced and
// closed, then renamed over the old file, and the directory is synced so
// that the rename itself is on disk.
//
// Hearth writes such files in several places that may not import each
// other: certificates and keys (pki), the daemon's local token (adminapi),
// the installed unit and configuration (installer). The one copy lives in
// this leaf, which imports nothing of Hearth's, so that every package may
// import it, as it may import clock.
//
// What it does not do: write several files as one (pki.WriteSet builds
// that on Write and SyncDir), or stand in for the file formats of other
// programs that Hearth imitates or shares a directory with (the node's KV
// store and the simulated SGLang file backend name their temporary files
// as those formats require).
package atomicfile
