package runtime

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
)

// TestSGLangMeasureProfileServerInfo: SGLang's /get_server_info is a
// deprecated alias of /server_info (http_server.py logs "Endpoint
// '/get_server_info' is deprecated and will be removed in a future version.
// Please use '/server_info' instead." on every call), so the profile is read
// from /server_info, here from a server that has only it.
func TestSGLangMeasureProfileServerInfo(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /server_info", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"max_total_num_tokens": 8192, "page_size": 16, "context_length": 4096}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p, ok := KindSGLang.Descriptor().MeasureProfile(t.Context(), srv.Client(), srv.URL, catalog.Profile{})
	if !ok || p.BlockSize != 16 || p.GPUBlocks != 512 || p.MaxModelLen != 4096 {
		t.Errorf("MeasureProfile = %+v, %v; want 512 blocks of 16, context 4096", p, ok)
	}
}
