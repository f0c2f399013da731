//go:build !unix

package doctor

import "errors"

// statfsFree is not implemented outside Unix: Hearth's hosts are Linux.
func statfsFree(string) (uint64, error) {
	return 0, errors.New("disk space: not supported on this system")
}
