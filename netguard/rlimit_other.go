//go:build !unix

package netguard

// MaxConns is ceiling where the descriptor limit cannot be read.
func MaxConns(share, ceiling int) int { return ceiling }
