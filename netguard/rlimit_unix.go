//go:build unix

package netguard

import "syscall"

// MaxConns is a cap for one listener: a share (1/share) of the process's
// file descriptor limit, so that the other listeners, the engines'
// connections and the files the daemon opens keep theirs, and at most
// ceiling.
func MaxConns(share, ceiling int) int {
	var lim syscall.Rlimit
	n := ceiling
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 && lim.Cur/uint64(share) < uint64(n) {
		n = int(lim.Cur / uint64(share))
	}
	return max(n, 1)
}
