package daemon

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/api"
)

// sessionJSON is one agent session in GET /api/v1/sessions.
type sessionJSON struct {
	ID         string    `json:"id"`
	Client     string    `json:"client"`
	Worker     string    `json:"worker"` // where its last turn ran
	LastActive time.Time `json:"last_active"`
	// ContextTokens is the prompt size of the session's last turn (side
	// requests do not count); 0 before the first turn.
	ContextTokens int        `json:"context_tokens"`
	Turns         []turnJSON `json:"turns"`
}

// turnJSON is one request of a session: a turn of the conversation, or a
// side request beside it (kind "side"), which is never compared with the
// turns and so never diverges.
type turnJSON struct {
	// N is the request's place in the session, from 1, in order of
	// arrival; turns and side requests share the count.
	N            int       `json:"n"`
	Kind         string    `json:"kind"` // "turn" or "side"
	At           time.Time `json:"at"`
	Worker       string    `json:"worker"`
	PromptTokens int       `json:"prompt_tokens"`
	CachedTokens int       `json:"cached_tokens"`
	OutputTokens int       `json:"output_tokens"`
	// SharedBlocks is how many leading blocks the prompt shares with the
	// previous turn's.
	SharedBlocks int `json:"shared_blocks"`
	// DivergedAtBlock is null unless a prefix the engine had was lost or
	// changed; Cause then says why: evicted, routed_elsewhere or
	// prompt_changed (api.Cause*).
	DivergedAtBlock *int    `json:"diverged_at_block"`
	Cause           *string `json:"cause"`
	// Changed is, for prompt_changed, the text around the first differing
	// block in the previous turn's prompt and in this one.
	Changed *changeJSON `json:"changed,omitempty"`
}

// changeJSON is what a client rewrote in its prompt.
type changeJSON struct {
	Was string `json:"was"`
	Now string `json:"now"`
}

// sessionsJSONOf turns the gateway's record into the API's view; decode
// turns token ids into text.
func sessionsJSONOf(ss []api.SessionRecord, decode func([]uint32) string) []sessionJSON {
	out := make([]sessionJSON, len(ss))
	for i, s := range ss {
		js := sessionJSON{ID: s.ID, Client: s.Client, Worker: s.Worker, LastActive: s.LastActive.UTC(), Turns: make([]turnJSON, len(s.Turns))}
		for j, t := range s.Turns {
			tj := turnJSON{
				N: j + 1, Kind: string(t.Kind), At: t.At.UTC(), Worker: t.Worker,
				PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, OutputTokens: t.OutputTokens,
				SharedBlocks: t.SharedBlocks,
			}
			if t.Diverged {
				block, cause := t.DivergedBlock, t.Cause
				tj.DivergedAtBlock, tj.Cause = &block, &cause
			}
			if t.ChangedFrom != nil || t.ChangedTo != nil {
				tj.Changed = &changeJSON{Was: decode(t.ChangedFrom), Now: decode(t.ChangedTo)}
			}
			if t.Kind == api.KindTurn {
				js.ContextTokens = t.PromptTokens
			}
			js.Turns[j] = tj
		}
		out[i] = js
	}
	return out
}

// sessionsHandler serves GET /api/v1/sessions: the agent sessions the
// gateway keeps, most recently active first, each with its requests in
// order of arrival.
func sessionsHandler(traffic *api.Traffic, decode func([]uint32) string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"sessions": sessionsJSONOf(traffic.Sessions(), decode)})
	}
}
