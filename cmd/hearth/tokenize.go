package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hearth-llm/hearth/tokenizer"
)

// tokenizeInput is one line of hearth tokenize's input. Text is read in
// plain mode; Messages, Tools and Kwargs with --chat.
type tokenizeInput struct {
	ID       json.RawMessage `json:"id"`
	Text     *string         `json:"text"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
	Kwargs   map[string]any  `json:"kwargs"`
}

type tokenizeOutput struct {
	ID       json.RawMessage `json:"id"`
	IDs      []uint32        `json:"ids"`
	Rendered *string         `json:"rendered,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// runTokenize tokenizes JSON lines from stdin, one result line per input
// line, in order. A line that cannot be tokenized gets an error field and
// the command fails at the end, after every line was answered.
func runTokenize(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "tokenize", "tokenize [--tokenizer DIR] [--chat] < in.jsonl > out.jsonl")
	dir := fs.String("tokenizer", "", "directory holding tokenizer.json and tokenizer_config.json (default: built-in Qwen3)")
	chat := fs.Bool("chat", false, `read {"id","messages","tools","kwargs"} lines, render the chat template and print "rendered" too`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var (
		model *tokenizer.Model
		err   error
	)
	if *dir == "" {
		model, err = tokenizer.Qwen3()
	} else {
		model, err = tokenizer.Load(*dir)
	}
	if err != nil {
		return err
	}

	in := bufio.NewReaderSize(env.stdin, 1<<20)
	out := bufio.NewWriter(env.stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	failed := 0
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, readErr := in.ReadBytes('\n')
		if len(line) > 0 && !isBlank(line) {
			result := tokenizeLine(model, line, *chat)
			if result.Error != "" {
				result.Error = fmt.Sprintf("line %d: %s", lineNo, result.Error)
				failed++
			}
			if err := enc.Encode(result); err != nil {
				return fmt.Errorf("tokenize: write: %w", err)
			}
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			return fmt.Errorf("tokenize: read: %w", readErr)
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("tokenize: write: %w", err)
	}
	if failed > 0 {
		return fmt.Errorf("tokenize: %d input lines failed (see their error fields)", failed)
	}
	return nil
}

func tokenizeLine(model *tokenizer.Model, line []byte, chat bool) tokenizeOutput {
	var in tokenizeInput
	if err := json.Unmarshal(line, &in); err != nil {
		return tokenizeOutput{Error: fmt.Sprintf("bad JSON: %v", err)}
	}
	res := tokenizeOutput{ID: in.ID}
	if res.ID == nil {
		res.ID = json.RawMessage("null")
	}
	if !chat {
		if in.Text == nil {
			res.Error = `no "text" (chat lines need --chat)`
			return res
		}
		res.IDs = model.Encode(*in.Text)
		return res
	}
	if in.Messages == nil {
		res.Error = `no "messages"`
		return res
	}
	req := tokenizer.ChatRequest{Messages: in.Messages, Tools: in.Tools, Kwargs: map[string]any{}}
	for k, v := range in.Kwargs {
		if k == "add_generation_prompt" {
			b, ok := v.(bool)
			if !ok {
				res.Error = "kwargs.add_generation_prompt is not a boolean"
				return res
			}
			req.AddGenerationPrompt = b
			continue
		}
		req.Kwargs[k] = v
	}
	rendered, ids, err := model.EncodeChat(req)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.IDs, res.Rendered = ids, &rendered
	return res
}

func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}
