//go:build !linux

package router

func decisionCPUTime() int64 { return 0 }

const haveDecisionCPUTime = false
