// Package installer holds what a one-command install needs: service unit
// templates and the checks a host must pass (driver, container runtime).
//
// It must not be imported by the daemon's request path.
package installer
