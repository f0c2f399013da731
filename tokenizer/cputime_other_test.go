//go:build !linux

package tokenizer

import "testing"

func reportCPU(*testing.B) func() { return func() {} }

func reportCPUTokens(*testing.B, int) func() { return func() {} }
