package docker

import hruntime "github.com/hearth-llm/hearth/runtime"

// SetPortPicker makes l pick host ports with pick.
func SetPortPicker(l *Launcher, pick func() (hruntime.Ports, error)) { l.ports = pick }

// Pull is pull, for tests against a registry.
var Pull = pull
