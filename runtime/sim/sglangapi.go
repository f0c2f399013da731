package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
)

// SGLang's own endpoints, served by the SGLang flavour besides the OpenAI
// API: /health_generate, /server_info (and its deprecated alias
// /get_server_info) and /get_model_info.

// generateOne runs a one-token generation through the engine, as SGLang's
// health check and warm-up do, and returns once its token arrived. The
// request goes around the HTTP layer's metrics, as SGLang marks it
// log_metrics=False.
func (s *Server) generateOne(ctx context.Context, idPrefix string, prompt []uint32) error {
	id := fmt.Sprintf("%s_%016x%08x", idPrefix, s.idPrefix, s.nextID.Add(1))
	ch, err := s.opts.Engine.Submit(ctx, &Request{ID: id, Prompt: prompt, Output: []uint32{prompt[0]}})
	if err != nil {
		return err
	}
	select {
	case _, ok := <-ch:
		if !ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			return errors.New("the engine stopped before the token")
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handleHealthGenerate checks the whole path, scheduler included: SGLang's
// HTTP server outlives a crashed scheduler, so only a generation tells.
func (s *Server) handleHealthGenerate(w http.ResponseWriter, r *http.Request) {
	if s.starting.Load() || !s.engineRunning.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.HealthCheckTimeout)
	defer cancel()
	if err := s.generateOne(ctx, "HEALTH_CHECK", []uint32{0}); err != nil {
		if r.Context().Err() == nil {
			s.log.Error("Health check failed.", "timeout", s.opts.HealthCheckTimeout, "error", err)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleDeprecatedServerInfo answers /get_server_info, which SGLang keeps
// as an alias of /server_info and warns about on every call.
func (s *Server) handleDeprecatedServerInfo(w http.ResponseWriter, r *http.Request) {
	s.log.Warn("Endpoint '/get_server_info' is deprecated and will be removed in a future version. " +
		"Please use '/server_info' instead.")
	s.handleServerInfo(w, r)
}

// handleServerInfo answers SGLang's /server_info: its server arguments,
// its scheduler's info (max_total_num_tokens is the KV capacity in tokens)
// and the version, with the fields the simulator models filled in.
func (s *Server) handleServerInfo(w http.ResponseWriter, _ *http.Request) {
	info := maps.Clone(s.opts.ServerInfo)
	if info == nil {
		info = map[string]any{}
	}
	capacity := s.opts.NumGPUBlocks * s.opts.BlockSize
	known := map[string]any{
		"model_path":           s.opts.ModelPath,
		"tokenizer_path":       s.opts.ModelPath,
		"served_model_name":    s.opts.ServedModelName,
		"page_size":            s.opts.BlockSize,
		"context_length":       s.opts.MaxModelLen,
		"mem_fraction_static":  s.opts.GPUMemoryUtilization,
		"max_total_num_tokens": capacity,
		"max_req_input_len":    max(0, min(s.opts.MaxModelLen, capacity)-1),
		"enable_metrics":       true,
		"random_seed":          s.opts.Seed,
	}
	maps.Copy(info, known)
	if _, ok := info["version"]; !ok {
		info["version"] = sglangVersion
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleModelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path":     s.opts.ModelPath,
		"tokenizer_path": s.opts.ModelPath,
		"is_generation":  true,
	})
}

// sglangVersion is the SGLang release the flavour reports.
const sglangVersion = "0.5.5"
