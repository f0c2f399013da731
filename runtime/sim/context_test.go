package sim

import (
	"errors"
	"testing"
)

func TestCheckContextLength(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limit, prompt int
		maxTokens     int64
		want          string
	}{
		{"fits exactly", 8192, 8000, 192, ""},
		{"prompt alone fits", 8192, 8191, 0, ""},
		{"prompt fills the context", 8192, 8192, 0,
			"This model's maximum context length is 8192 tokens. However, your request has 8192 input tokens. Please reduce the length of the input messages."},
		{"prompt over, max_tokens given", 8192, 9000, 100,
			"This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens. Please reduce the length of the input messages."},
		{"max_tokens one too many", 8192, 8000, 193,
			"'max_tokens' or 'max_completion_tokens' is too large: 193. This model's maximum context length is 8192 tokens and your request has 8000 input tokens (193 > 8192 - 8000)."},
		{"huge max_tokens", 8192, 10, 1 << 40,
			"'max_tokens' or 'max_completion_tokens' is too large: 1099511627776. This model's maximum context length is 8192 tokens and your request has 10 input tokens (1099511627776 > 8192 - 10)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckContextLength(tc.limit, tc.prompt, tc.maxTokens)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
			if !errors.Is(err, ErrPromptTooLong) {
				t.Errorf("%v is not ErrPromptTooLong", err)
			}
		})
	}
}
