package runtime

import (
	"net/http"
	"testing"
)

// TestProbeClient: the client that probes engines sends no request
// through a proxy named in the environment (a nil Proxy; Go's
// environment proxy would send an engine addressed by the host's name
// there) and bounds every exchange, so that an engine that accepts and
// hangs cannot hold a probe for ever.
func TestProbeClient(t *testing.T) {
	c := NewProbeClient()
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", c.Transport)
	}
	if tr.Proxy != nil {
		t.Error("the probe client takes a proxy; engines are on this node and must be reached directly")
	}
	if c.Timeout <= 0 || c.Timeout < tokenizerCheckTimeout || c.Timeout < probeTimeout {
		t.Errorf("timeout %v: want a bound no shorter than any probe's own (%v, %v)", c.Timeout, probeTimeout, tokenizerCheckTimeout)
	}
	if tr.DialContext == nil {
		t.Error("no dial timeout")
	}
	if NewProbeClient() == c {
		t.Error("NewProbeClient returned a shared client; callers may set fields of their own")
	}
}
