package console

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeHealth is a HealthSource with fixed answers that counts its calls.
type fakeHealth struct {
	checks []HealthCheck
	err    error
	calls  int
}

func (f *fakeHealth) Checks(context.Context) ([]HealthCheck, error) {
	f.calls++
	return f.checks, f.err
}

func withHealth(h HealthSource) harnessOption {
	return func(_ *Config, d *Deps) { d.Health = h }
}

// someChecks are one check of each status, as hearth doctor words them.
func someChecks() []HealthCheck {
	return []HealthCheck{
		{Name: "nvidia driver", Status: "pass", Evidence: "driver 580.95.05"},
		{Name: "gpu 0 memory", Status: "warn", Evidence: "gpu 0 (NVIDIA GeForce RTX 4090): 18.0 GiB available of 24.0 GiB",
			Fix: "close the programs holding 6.0 GiB of the GPU's memory for the longer context"},
		{Name: "nvidia container runtime", Status: "fail", Evidence: "no nvidia runtime (runtimes: runc) and no NVIDIA CDI device",
			Fix: "install nvidia-container-toolkit, then: sudo nvidia-ctk runtime configure --runtime=docker"},
	}
}

func TestHealthPageGolden(t *testing.T) {
	tests := []struct {
		name   string
		health HealthSource // nil: none
		path   string
		want   []string
		absent []string
	}{
		{name: "health-none", path: "/console/health",
			want: []string{"Health checks are not available", `aria-current="page">Health`}, absent: []string{"Check again"}},
		{name: "health-loaded", health: &fakeHealth{checks: someChecks()}, path: "/console/health",
			want: []string{
				`<span class="badge good">pass</span>`, `<span class="badge warn">warn</span>`, `<span class="badge bad">fail</span>`,
				"driver 580.95.05", "Fix: install nvidia-container-toolkit", "1 passed", "1 warned", "1 failed",
				`hx-get="/console/health/checks"`, "Check again",
			}},
		{name: "health-error", health: &fakeHealth{err: errors.New("docker: context deadline exceeded")}, path: "/console/health",
			want: []string{"Cannot run the checks: docker: context deadline exceeded", "Check again"}},
		{name: "health-fragment", health: &fakeHealth{checks: someChecks()}, path: "/console/health/checks",
			want: []string{`id="health-checks"`, "badge bad"}, absent: []string{"<html", "<nav"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []harnessOption
			opts = append(opts, withKeyRequired(false))
			if tc.health != nil {
				opts = append(opts, withHealth(tc.health))
			}
			h := newHarness(t, nil, opts...)
			resp, body := h.do(t, request{path: tc.path})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d\n%s", resp.StatusCode, body)
			}
			checkPage(t, tc.name+".html", body, tc.want, tc.absent)
		})
	}
}

// TestHealthChecksRunPerRequest: "Check again" asks the source again.
func TestHealthChecksRunPerRequest(t *testing.T) {
	src := &fakeHealth{checks: someChecks()}
	h := newHarness(t, nil, withKeyRequired(false), withHealth(src))
	h.do(t, request{path: "/console/health"})
	h.do(t, request{path: "/console/health/checks"})
	if src.calls != 2 {
		t.Errorf("the source was asked %d times, want 2", src.calls)
	}
}

// TestHealthPageNeedsLogin: the checks tell much about the host.
func TestHealthPageNeedsLogin(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(true), withHealth(&fakeHealth{checks: someChecks()}))
	for _, path := range []string{"/console/health", "/console/health/checks"} {
		resp, body := h.do(t, request{path: path})
		if resp.StatusCode != 303 || strings.Contains(body, "driver 580.95.05") {
			t.Errorf("%s: status %d, want 303 to the login page, without the checks", path, resp.StatusCode)
		}
	}
}
