package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sessionsView is GET /api/v1/sessions as a client reads it.
type sessionsView struct {
	Sessions []sessionView `json:"sessions"`
}

type sessionView struct {
	ID            string `json:"id"`
	Client        string `json:"client"`
	ContextTokens int    `json:"context_tokens"`
	Turns         []struct {
		N               int       `json:"n"`
		Kind            string    `json:"kind"`
		At              time.Time `json:"at"`
		PromptTokens    int       `json:"prompt_tokens"`
		CachedTokens    int       `json:"cached_tokens"`
		DivergedAtBlock *int      `json:"diverged_at_block"`
		Cause           *string   `json:"cause"`
	} `json:"turns"`
}

func getSessions(t *testing.T, baseURL string) sessionsView {
	t.Helper()
	resp, err := http.Get(baseURL + "/api/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/sessions: %d %s", resp.StatusCode, body)
	}
	var v sessionsView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET /api/v1/sessions: %v: %s", err, body)
	}
	return v
}

// TestSessionsReplayTheClients replays each coding agent's whole request
// sequence (api/testdata/replay/<client>/, in file order: side requests
// included, as the captures of the real clients show them) against hearth
// up --sim and checks the session view: side requests apart as kind
// "side", turns in order of arrival, no turn diverged (every turn extends
// the previous one on a GPU that keeps it), and the session's context the
// last turn's prompt as the client was told it.
func TestSessionsReplayTheClients(t *testing.T) {
	baseURL, _ := startUp(t)
	for _, tc := range []struct {
		client string
		decode func(*testing.T, []sseEvent) streamedAnswer
		kinds  []string // expected, in order of arrival
	}{
		{"claude-code", decodeAnthropicStream, []string{"side", "side", "turn", "turn"}},
		{"codex", decodeResponsesStream, []string{"turn", "turn"}},
		{"opencode", decodeChatStream, []string{"side", "turn", "turn"}},
	} {
		t.Run(tc.client, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join("..", "api", "testdata", "replay", tc.client, "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no replay fixtures for %s: %v", tc.client, err)
			}
			slices.Sort(files)
			var answers []streamedAnswer
			for _, f := range files {
				answers = append(answers, sendFixture(t, baseURL, filepath.Join("replay", tc.client, filepath.Base(f)), tc.decode))
			}
			var session *sessionView
			v := getSessions(t, baseURL)
			for i := range v.Sessions {
				if v.Sessions[i].Client == tc.client {
					if session != nil {
						t.Fatalf("two %s sessions (%s, %s): the replay is one session", tc.client, session.ID, v.Sessions[i].ID)
					}
					session = &v.Sessions[i]
				}
			}
			if session == nil {
				t.Fatalf("no %s session in %+v", tc.client, v)
			}
			if len(session.Turns) != len(tc.kinds) {
				t.Fatalf("%d requests in the session, want %d: %+v", len(session.Turns), len(tc.kinds), session.Turns)
			}
			lastTurn := -1
			for i, turn := range session.Turns {
				if turn.N != i+1 || turn.Kind != tc.kinds[i] {
					t.Errorf("request %d: n %d kind %q, want n %d kind %q", i, turn.N, turn.Kind, i+1, tc.kinds[i])
				}
				if i > 0 && turn.At.Before(session.Turns[i-1].At) {
					t.Errorf("request %d arrived at %v, before request %d (%v): not in order", i+1, turn.At, i, session.Turns[i-1].At)
				}
				if turn.PromptTokens != answers[i].promptTokens || turn.CachedTokens != answers[i].cachedTokens {
					t.Errorf("request %d: %d prompt tokens, %d cached; the client was told %d, %d",
						i+1, turn.PromptTokens, turn.CachedTokens, answers[i].promptTokens, answers[i].cachedTokens)
				}
				share := float64(turn.CachedTokens) / float64(max(turn.PromptTokens, 1))
				if turn.DivergedAtBlock != nil || turn.Cause != nil {
					t.Errorf("request %d (%s, %.0f%% cached) marked diverged at block %v, cause %v", i+1, turn.Kind, 100*share, deref(turn.DivergedAtBlock), deref(turn.Cause))
				}
				if turn.Kind == "turn" {
					lastTurn = i
				}
			}
			if want := answers[lastTurn].promptTokens; session.ContextTokens != want || want == 0 {
				t.Errorf("context %d tokens, want the last turn's prompt, %d", session.ContextTokens, want)
			}
			for i, turn := range session.Turns {
				if turn.Kind == "side" && turn.PromptTokens >= session.ContextTokens {
					t.Errorf("side request %d has %d prompt tokens, not fewer than the conversation's %d", i+1, turn.PromptTokens, session.ContextTokens)
				}
			}
			if last := session.Turns[lastTurn]; last.CachedTokens*2 < last.PromptTokens {
				t.Errorf("last turn: %d of %d prompt tokens cached; want most of it, as it extends the turn before", last.CachedTokens, last.PromptTokens)
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestSessionsShowWhatAPromptChanged: a client that rewrites an early
// part of its prompt between turns (a date in a reminder) gets its turn
// marked prompt_changed, with the text before and now.
func TestSessionsShowWhatAPromptChanged(t *testing.T) {
	baseURL, _ := startUp(t)
	send := func(name string, rewrite func(string) string) {
		raw, err := os.ReadFile(filepath.Join("..", "api", "testdata", "replay", "claude-code", name))
		if err != nil {
			t.Fatal(err)
		}
		var f clientFixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, baseURL+f.Path, strings.NewReader(rewrite(string(f.Body))))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range f.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", name, resp.Status)
		}
	}
	send("003-turn1.json", func(s string) string { return s })
	send("004-turn2.json", func(s string) string { return strings.ReplaceAll(s, "Today is 2026-11-29.", "Today is 2026-12-01.") })

	resp, err := http.Get(baseURL + "/api/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Sessions []struct {
			Turns []struct {
				Cause   *string `json:"cause"`
				Changed *struct {
					Was string `json:"was"`
					Now string `json:"now"`
				} `json:"changed"`
			} `json:"turns"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Sessions) != 1 || len(v.Sessions[0].Turns) != 2 {
		t.Fatalf("sessions: %+v, %v", v, err)
	}
	turn := v.Sessions[0].Turns[1]
	if turn.Cause == nil || *turn.Cause != "prompt_changed" || turn.Changed == nil {
		t.Fatalf("the rewritten turn: %+v, want prompt_changed with the change", turn)
	}
	if !strings.Contains(turn.Changed.Was, "2026-11-29") || !strings.Contains(turn.Changed.Now, "2026-12-01") {
		t.Errorf("change was %q, now %q: want the two dates", turn.Changed.Was, turn.Changed.Now)
	}
}
