//go:build unix

package doctor

import (
	"fmt"
	"syscall"
)

// statfsFree is the space free to unprivileged users on path's file system.
func statfsFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:unconvert // field types differ between systems
}
