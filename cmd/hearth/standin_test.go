package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// Stand-ins for the coding agents hearth launch starts: this test binary,
// run under a client's name (a link on PATH), reads its settings as the
// client does, records them in $standInRecordEnv, and makes a real
// request with them through the vendor's SDK. A setting that does not
// reach a working request fails the stand-in, and so the test.

// standInRecordEnv names the file a stand-in writes its record to.
const standInRecordEnv = "HEARTH_TEST_STANDIN_RECORD"

// standInRecord is what a stand-in saw and did.
type standInRecord struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"` // the variables that configure clients
	// Model is the served model the request named; Answer what came back.
	Model, Answer string
	// MaxTokens is the output cap the request asked for.
	MaxTokens int
	Err       string
}

// standInClients are the stand-ins by executable name.
var standInClients = map[string]func(ctx context.Context, rec *standInRecord, args []string) error{
	"claude":   standInClaude,
	"codex":    standInCodex,
	"opencode": standInOpenCode,
}

// runStandIn is the stand-in's main. Its own arguments, passed through
// hearth launch: --exit N ends it with status N after its request;
// --wait-signal prints "waiting" and ends with status 42 on SIGTERM.
func runStandIn(name string) int {
	run := standInClients[name]
	rec := standInRecord{Args: os.Args[1:], Env: map[string]string{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		for _, prefix := range []string{"ANTHROPIC_", "CLAUDE_CODE_", "OPENCODE_", "HEARTH_API_KEY"} {
			if strings.HasPrefix(k, prefix) {
				rec.Env[k] = v
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, &rec, os.Args[1:])
	if err != nil {
		rec.Err = err.Error()
	}
	b, _ := json.Marshal(rec)
	if werr := os.WriteFile(os.Getenv(standInRecordEnv), b, 0o600); werr != nil {
		fmt.Fprintln(os.Stderr, "stand-in:", werr)
		return 3
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stand-in:", err)
		return 3
	}
	if slices.Contains(os.Args[1:], "--wait-signal") {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM)
		fmt.Println("waiting")
		<-signals
		return 42
	}
	if i := slices.Index(os.Args[1:], "--exit"); i >= 0 && i+2 < len(os.Args) {
		n, _ := strconv.Atoi(os.Args[i+2])
		return n
	}
	return 0
}

// requireEnv returns the variable's value, or an error naming it.
func requireEnv(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set", name)
	}
	return v, nil
}

// servedModels lists the models the API at baseURL (its /v1) serves.
func servedModels(ctx context.Context, baseURL, key string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/models: %s, %v", resp.Status, err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// standInClaude reads Claude Code's environment. The SDK takes the base
// URL, the token and, were it left set, ANTHROPIC_API_KEY from the
// environment as Claude Code does; every model tier must name a served
// model.
func standInClaude(ctx context.Context, rec *standInRecord, _ []string) error {
	base, err := requireEnv("ANTHROPIC_BASE_URL")
	if err != nil {
		return err
	}
	token, err := requireEnv("ANTHROPIC_AUTH_TOKEN")
	if err != nil {
		return err
	}
	served, err := servedModels(ctx, base, token)
	if err != nil {
		return err
	}
	for _, tier := range []string{"ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
		"ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"} {
		if m := os.Getenv(tier); !slices.Contains(served, m) {
			return fmt.Errorf("%s=%q is not a served model (%q)", tier, m, served)
		}
	}
	for _, limit := range []string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CLAUDE_CODE_MAX_OUTPUT_TOKENS"} {
		if n, err := strconv.Atoi(os.Getenv(limit)); err != nil || n <= 0 {
			return fmt.Errorf("%s=%q is not a token count", limit, os.Getenv(limit))
		}
	}
	rec.MaxTokens, _ = strconv.Atoi(os.Getenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS"))
	rec.Model = os.Getenv("ANTHROPIC_MODEL")
	client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAuthToken(token), aoption.WithMaxRetries(0))
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.Model(rec.Model),
		MaxTokens: int64(rec.MaxTokens),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("List the files here"))},
	})
	if err != nil {
		return err
	}
	for _, b := range msg.Content {
		rec.Answer += b.Text
	}
	return nil
}

// standInCodex applies Codex's -c overrides as Codex does (a dotted key,
// the value TOML) to an empty configuration, then talks to the provider
// it names with its wire API.
func standInCodex(ctx context.Context, rec *standInRecord, args []string) error {
	cfg := map[string]any{}
	for i := 0; i < len(args); i++ {
		if args[i] != "-c" || i+1 == len(args) {
			continue
		}
		i++
		key, raw, ok := strings.Cut(args[i], "=")
		if !ok {
			return fmt.Errorf("override %q has no =", args[i])
		}
		var wrapped map[string]any
		if _, err := toml.Decode("_x_ = "+raw, &wrapped); err != nil {
			return fmt.Errorf("override %q: %w", args[i], err)
		}
		at := cfg
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := at[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[p] = next
			}
			at = next
		}
		at[parts[len(parts)-1]] = wrapped["_x_"]
	}
	model, _ := cfg["model"].(string)
	providerName, _ := cfg["model_provider"].(string)
	providers, _ := cfg["model_providers"].(map[string]any)
	provider, _ := providers[providerName].(map[string]any)
	baseURL, _ := provider["base_url"].(string)
	envKey, _ := provider["env_key"].(string)
	window, _ := cfg["model_context_window"].(int64)
	maxOut, _ := cfg["model_max_output_tokens"].(int64)
	if model == "" || baseURL == "" || envKey == "" || provider["wire_api"] != "responses" || window <= 0 || maxOut <= 0 {
		return fmt.Errorf("incomplete configuration %v", cfg)
	}
	key, err := requireEnv(envKey)
	if err != nil {
		return err
	}
	rec.Model, rec.MaxTokens = model, int(maxOut)
	client := openai.NewClient(ooption.WithBaseURL(baseURL), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:           model,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("List the files here")},
		MaxOutputTokens: openai.Int(maxOut),
	})
	if err != nil {
		return err
	}
	rec.Answer = resp.OutputText()
	return nil
}

// standInOpenCode reads OPENCODE_CONFIG_CONTENT as OpenCode merges it and
// talks to the provider its model names, through the OpenAI-compatible
// chat API, substituting {env:NAME} as OpenCode does in a file.
func standInOpenCode(ctx context.Context, rec *standInRecord, _ []string) error {
	content, err := requireEnv("OPENCODE_CONFIG_CONTENT")
	if err != nil {
		return err
	}
	var cfg struct {
		Provider map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
				APIKey  string `json:"apiKey"`
			} `json:"options"`
			Models map[string]struct {
				Limit struct{ Context, Output int } `json:"limit"`
			} `json:"models"`
		} `json:"provider"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal([]byte(content), &cfg); err != nil {
		return fmt.Errorf("OPENCODE_CONFIG_CONTENT: %w", err)
	}
	providerName, model, ok := strings.Cut(cfg.Model, "/")
	provider, known := cfg.Provider[providerName]
	entry, listed := provider.Models[model]
	if !ok || !known || !listed || provider.NPM != "@ai-sdk/openai-compatible" {
		return fmt.Errorf("model %q is not one of its providers' models", cfg.Model)
	}
	if entry.Limit.Context <= 0 || entry.Limit.Output <= 0 {
		return fmt.Errorf("model %q has no limits: %+v", model, entry.Limit)
	}
	key := provider.Options.APIKey
	if name, isEnv := strings.CutPrefix(key, "{env:"); isEnv {
		key = os.Getenv(strings.TrimSuffix(name, "}"))
	}
	if key == "" {
		return errors.New("no API key")
	}
	rec.Model, rec.MaxTokens = model, entry.Limit.Output
	client := openai.NewClient(ooption.WithBaseURL(provider.Options.BaseURL), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("List the files here")},
		MaxTokens: openai.Int(int64(entry.Limit.Output)),
	})
	if err != nil {
		return err
	}
	if len(resp.Choices) > 0 {
		rec.Answer = resp.Choices[0].Message.Content
	}
	return nil
}
