package doctor

import "context"

// CheckTokenizerPrefix starts the name of an engine's tokenizer check:
// "tokenizer: sim/gpu0".
const CheckTokenizerPrefix = "tokenizer: "

// EngineTokenizer is what a running daemon's start-up self-check found for
// one engine: State "agrees", "differs" or "unchecked", and Summary, the
// finding in one sentence (where the ids differ).
type EngineTokenizer struct {
	Engine, State, Summary string
}

// TokenizerSource reads the self-checks of a running daemon's engines. An
// error (no daemon running) adds no checks: there is nothing to weigh.
type TokenizerSource interface {
	EngineTokenizers(ctx context.Context) ([]EngineTokenizer, error)
}

// fixTokenizer is what to do when an engine tokenizes differently from
// Hearth: its KV events cannot be matched to requests.
const fixTokenizer = "serve the model with the tokenizer files Hearth reads (its Hugging Face cache, --hf-cache) and no --tokenizer override; " +
	"until then that engine is routed on predicted caches"

// checkTokenizers weighs each engine's self-check: agreeing passes, a
// difference or a check that could not run warns (the daemon keeps
// serving, on predicted caches for a difference).
func (d *Doctor) checkTokenizers(ctx context.Context) []Check {
	if d.Tokenizers == nil {
		return nil
	}
	engines, err := d.Tokenizers.EngineTokenizers(ctx)
	if err != nil {
		return nil
	}
	var found []selfCheck
	for _, e := range engines {
		found = append(found, selfCheck(e))
	}
	return weighSelfChecks(CheckTokenizerPrefix, "agrees", found, fixTokenizer, func(engine string) string {
		return "check that the engine serves POST /tokenize (vLLM and SGLang do); hearth logs " + engine + " shows its errors"
	})
}

// selfCheck is what one of a running daemon's start-up self-checks found
// for one engine (EngineTokenizer, EngineKVEvents).
type selfCheck struct {
	Engine, State, Summary string
}

// weighSelfChecks weighs one kind of start-up self-check, each engine's
// named prefix+engine: the state ok passes, "differs" warns with
// fixDiffers, "unchecked" (the check could not run) warns with
// fixUnchecked's words for that engine. The daemon keeps serving either
// way, on predicted caches for a difference.
func weighSelfChecks(prefix, ok string, found []selfCheck, fixDiffers string, fixUnchecked func(engine string) string) []Check {
	var checks []Check
	for _, e := range found {
		name := prefix + e.Engine
		switch e.State {
		case ok:
			checks = append(checks, pass(name, oneLine(e.Summary)))
		case "differs":
			checks = append(checks, warn(name, oneLine(e.Summary), fixDiffers))
		case "unchecked":
			checks = append(checks, warn(name, oneLine(e.Summary), fixUnchecked(e.Engine)))
		}
	}
	return checks
}
