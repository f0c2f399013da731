package runtime

import (
	"encoding/json"
	"fmt"
	"math"
)

// ModelContextOf is the longest context a model of native context native
// takes under overrides, a JSON object overriding its config.json (vLLM's
// --hf-overrides, SGLang's --json-model-override-args); 0 when they leave
// it as it is. A YaRN rope_scaling with original_max_position_embeddings
// gives original x factor, as vLLM derives its max_model_len; otherwise a
// max_position_embeddings override gives itself, as SGLang reads the
// context; other rope types with a factor scale the native context. Only
// the fields that change the context are read; the rest of the object is
// the engine's business. An object that is not JSON, or a factor or length
// that is not a positive number, is an error, as the engines' config
// validation makes it.
func ModelContextOf(overrides string, native int) (int, error) {
	if overrides == "" {
		return 0, nil
	}
	var o struct {
		MaxPositions *float64 `json:"max_position_embeddings"`
		Rope         *struct {
			Type     string   `json:"rope_type"`
			OldType  string   `json:"type"`
			Factor   *float64 `json:"factor"`
			Original *float64 `json:"original_max_position_embeddings"`
		} `json:"rope_scaling"`
	}
	if err := json.Unmarshal([]byte(overrides), &o); err != nil {
		return 0, fmt.Errorf("model overrides: %w", err)
	}
	positive := func(what string, f *float64) (float64, error) {
		if f == nil || !(*f > 0) || *f > math.MaxInt32 {
			return 0, fmt.Errorf("model overrides: %s must be a positive number", what)
		}
		return *f, nil
	}
	if o.Rope != nil && o.Rope.Factor != nil {
		factor, err := positive("rope_scaling.factor", o.Rope.Factor)
		if err != nil {
			return 0, err
		}
		base := float64(native)
		kind := o.Rope.Type
		if kind == "" {
			kind = o.Rope.OldType
		}
		if kind == "yarn" && o.Rope.Original != nil {
			if base, err = positive("rope_scaling.original_max_position_embeddings", o.Rope.Original); err != nil {
				return 0, err
			}
		}
		if n := base * factor; n <= math.MaxInt32 {
			return int(n), nil
		}
		return 0, fmt.Errorf("model overrides: a context of %g tokens", base*factor)
	}
	if o.MaxPositions != nil {
		n, err := positive("max_position_embeddings", o.MaxPositions)
		return int(n), err
	}
	return 0, nil
}
