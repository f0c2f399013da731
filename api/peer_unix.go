//go:build unix

package api

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the other end of c has closed it, without
// reading anything from it: a peek that finds the end of the stream or a
// reset. A connection that cannot be inspected counts as open.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		default:
			closed = true
		}
		return true // one look, never wait
	})
	return closed || err != nil
}
