package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// How the simulated model plays a coding agent: over one task (a user's
// request and the tool calls that follow it) it makes a few calls of the
// offered tools that only look (read a file, list a directory, glob, grep),
// with arguments taken from what the conversation shows, then answers
// briefly and says it is a simulated model. Tools that write, edit, delete,
// run commands or start other agents are used only when AgentOptions allow
// it; a tool whose required arguments cannot be filled is never called.

// AgentOptions shape the simulated model's tool use.
type AgentOptions struct {
	// AllowWriteTools lets the model call tools that change things or run
	// commands (write, edit, shell, ...). Off by default: an agent pointed
	// at the simulated engine must be able to work in a real directory
	// without it touching anything.
	AllowWriteTools bool
	// MinToolCalls and MaxToolCalls bound the tool calls one task makes
	// before the final answer; the number is picked per task from the
	// seed. Zero means the default, 3 to 6.
	MinToolCalls, MaxToolCalls int
}

// Default number of tool calls per task.
const (
	defaultMinToolCalls = 3
	defaultMaxToolCalls = 6
)

// ParseToolCallRange reads "N" or "N-M" (as --sim-tool-calls takes it) into
// opts.
func (o *AgentOptions) ParseToolCallRange(s string) error {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	var a, b int
	if _, err := fmt.Sscanf(lo, "%d", &a); err != nil {
		return fmt.Errorf("tool calls %q: want N or N-M", s)
	}
	b = a
	if found {
		if _, err := fmt.Sscanf(hi, "%d", &b); err != nil {
			return fmt.Errorf("tool calls %q: want N or N-M", s)
		}
	}
	if a < 0 || b < a {
		return fmt.Errorf("tool calls %q: want 0 <= N <= M", s)
	}
	o.MinToolCalls, o.MaxToolCalls = a, b
	if a == 0 && b == 0 {
		o.MaxToolCalls = -1 // no tool calls at all, not the default
	}
	return nil
}

// toolCallBudget is how many tool calls the task seeded by seed makes.
func (o AgentOptions) toolCallBudget(seed uint64) int {
	lo, hi := o.MinToolCalls, o.MaxToolCalls
	switch {
	case hi < 0:
		return 0
	case lo == 0 && hi == 0:
		lo, hi = defaultMinToolCalls, defaultMaxToolCalls
	case hi < lo:
		hi = lo
	}
	return lo + int(seed%uint64(hi-lo+1))
}

// toolClass is what a tool does, judged from its name.
type toolClass int

const (
	toolUnknown  toolClass = iota // not called: the model cannot tell what it does
	toolReadOnly                  // looks at files: read, list, glob, grep
	toolWriting                   // changes things, runs commands or starts agents
)

func (c toolClass) String() string {
	switch c {
	case toolReadOnly:
		return "read-only"
	case toolWriting:
		return "writing"
	}
	return "unknown"
}

// Words in tool names. Unknown words win over writing ones, writing over
// read-only: "TaskList" starts agents' tasks, "WebSearch" leaves the machine,
// "view_image" wants an image.
var (
	unknownToolWords = wordSet(`web url http fetch image browser mcp notebook`)
	writingToolWords = wordSet(`write edit patch apply delete remove rm unlink move mv rename copy cp
		bash shell sh exec execute run command cmd terminal process stdin kill stop start
		task todo todowrite agent spawn subagent wait send message create update set put post
		cron schedule worktree install commit push checkout save replace insert append mkdir`)
	readOnlyToolWords = wordSet(`read view cat list ls glob find grep search tree`)
)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// nameWords splits a tool or property name at underscores, dashes, dots and
// lower-to-upper case changes, lowercased: "TaskList" -> task, list.
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// classifyTool judges a tool by the words of its name.
func classifyTool(name string) toolClass {
	words := nameWords(name)
	has := func(set map[string]bool) bool {
		return slices.ContainsFunc(words, func(w string) bool { return set[w] })
	}
	switch {
	case len(words) == 0 || has(unknownToolWords):
		return toolUnknown
	case has(writingToolWords):
		return toolWriting
	case has(readOnlyToolWords):
		return toolReadOnly
	}
	return toolUnknown
}

// conversation is what the model gathers from the messages of a request.
type conversation struct {
	seen    map[string]bool // Files and Dirs, for de-duplication
	WorkDir string          // the working directory the client states, or ""
	Files   []string        // file paths seen, first seen first, absolute where WorkDir is known
	Dirs    []string        // directories seen, WorkDir first
	Words   []string        // words of the task, to search for
	// TaskSeed identifies the task (its user message), so every turn of
	// it picks the same number of tool calls.
	TaskSeed uint64
	// ToolTurns counts the assistant turns with tool calls since the task
	// began.
	ToolTurns int
	// Called holds the calls already made in the task ("name args").
	Called map[string]bool
}

// agentMessage is what the model reads of each message.
type agentMessage struct {
	Role      string
	Text      string
	ToolCalls []toolCall
}

var (
	workDirPattern = regexp.MustCompile(`(?i)(?:working directory|\bcwd)\s*[:=]?\s*<?\s*(/[^\s<>"'\x60]*)`)
	cwdTagPattern  = regexp.MustCompile(`<cwd>\s*(/[^\s<]*)\s*</cwd>`)
	absPathPattern = regexp.MustCompile(`(?:^|[\s"'\x60(\[=>])(/[A-Za-z0-9._\-]+(?:/[A-Za-z0-9._\-]+)*/?)`)
	relFilePattern = regexp.MustCompile(`(?:^|[\s"'\x60(\[=<>])((?:[A-Za-z0-9_\-]+/)*[A-Za-z0-9_\-]+\.(?:` + fileExtensions + `))\b`)
	reminder       = regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`)
	taskWord       = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]{3,}`)
)

const fileExtensions = `go|mod|sum|md|txt|py|js|mjs|ts|tsx|jsx|json|yaml|yml|toml|rs|c|h|cc|cpp|hpp|java|kt|rb|sh|html|css|sql|proto|lock|cfg|ini|xml|csv|env|gradle|swift|php|lua|zig`

// Words a search never looks for: they say what to do, not what to find.
var stopWords = wordSet(`this that there these those what which where when with from into about have
	here please could would should tell list files file show find look read many much does make some them
	their they your code the and for are how why all any can you`)

// readConversation gathers what the model needs from msgs: the working
// directory from any message (clients state it in the system prompt or an
// environment block), paths from the user's messages and tool results (not
// from system prompts, whose paths are examples), the task and how far it
// has gone.
func readConversation(msgs []agentMessage) conversation {
	conv := conversation{Called: map[string]bool{}, seen: map[string]bool{}}
	for _, m := range msgs {
		if conv.WorkDir == "" && (m.Role == "system" || m.Role == "developer" || m.Role == "user") {
			conv.WorkDir = findWorkDir(m.Text)
		}
	}
	start := taskStart(msgs)
	if start >= 0 {
		task := reminder.ReplaceAllString(msgs[start].Text, "")
		h := fnv.New64a()
		h.Write([]byte(task))
		conv.TaskSeed = h.Sum64()
		seen := map[string]bool{}
		for _, w := range taskWord.FindAllString(task, -1) {
			lw := strings.ToLower(w)
			if !stopWords[lw] && !seen[lw] {
				seen[lw] = true
				conv.Words = append(conv.Words, w)
			}
		}
		for _, m := range msgs[start+1:] {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				conv.ToolTurns++
				for _, c := range m.ToolCalls {
					conv.Called[callKey(c.Name, c.Arguments)] = true
				}
			}
		}
	}
	conv.addDir(conv.WorkDir)
	for _, m := range msgs {
		if m.Role != "user" && m.Role != "tool" {
			continue
		}
		text := m.Text
		if len(text) > maxScannedText {
			text = text[:maxScannedText]
		}
		for _, p := range findPaths(reminder.ReplaceAllString(text, ""), conv.WorkDir) {
			if strings.HasSuffix(p, "/") || !looksLikeFile(p) {
				conv.addDir(strings.TrimSuffix(p, "/"))
				continue
			}
			conv.addFile(p)
			if dir := path.Dir(p); dir != "." && dir != "/" {
				conv.addDir(dir)
			}
		}
	}
	return conv
}

// taskStart is the index of the user message that began the task: the last
// one that does not merely follow tool results (clients add notes after a
// tool result as a user message), or -1.
func taskStart(msgs []agentMessage) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		prev := i - 1
		for prev >= 0 && msgs[prev].Role == "system" {
			prev--
		}
		if prev < 0 || msgs[prev].Role != "tool" {
			return i
		}
	}
	return -1
}

func findWorkDir(text string) string {
	if m := cwdTagPattern.FindStringSubmatch(text); m != nil {
		return path.Clean(m[1])
	}
	if m := workDirPattern.FindStringSubmatch(text); m != nil {
		return path.Clean(strings.TrimRight(m[1], ".,;:)"))
	}
	return ""
}

// findPaths returns the absolute paths and relative file names in text,
// relative ones joined to workDir when it is known.
func findPaths(text, workDir string) []string {
	var out []string
	for _, m := range absPathPattern.FindAllStringSubmatch(text, -1) {
		p := strings.TrimRight(m[1], ".")
		if strings.HasPrefix(p, "//") || len(p) < 2 {
			continue
		}
		out = append(out, p)
	}
	for _, m := range relFilePattern.FindAllStringSubmatch(text, -1) {
		p := m[1]
		if workDir != "" {
			p = path.Join(workDir, p)
		}
		out = append(out, p)
	}
	return out
}

func looksLikeFile(p string) bool {
	base := path.Base(p)
	i := strings.LastIndexByte(base, '.')
	return i > 0 && i < len(base)-1
}

// Bounds on the work one request's conversation costs: tool results may be
// whole files or listings of thousands of paths, and a few of them are
// enough to choose from.
const (
	maxScannedText = 64 << 10 // bytes of each message searched for paths
	maxSeenPaths   = 256      // files and directories each
)

func (c *conversation) addFile(p string) {
	if len(c.Files) < maxSeenPaths && !c.seen[p] {
		c.seen[p] = true
		c.Files = append(c.Files, p)
	}
}

func (c *conversation) addDir(p string) {
	if p != "" && len(c.Dirs) < maxSeenPaths && !c.seen[p+"/"] {
		c.seen[p+"/"] = true
		c.Dirs = append(c.Dirs, p)
	}
}

func callKey(name, args string) string { return name + " " + args }

// fillArguments builds arguments for t from the conversation: every required
// property must be filled, or ok is false and the tool is not called.
func fillArguments(t toolSpec, conv *conversation, rng *rand.Rand) (args map[string]any, ok bool) {
	var s schemaNode
	if len(t.Parameters) > 0 && json.Unmarshal(t.Parameters, &s) != nil {
		return nil, false
	}
	wantsFile := toolWants(t.Name, "read", "view", "cat")
	writes := classifyTool(t.Name) == toolWriting
	args = map[string]any{}
	for _, req := range s.Required {
		if _, done := args[req]; done {
			continue
		}
		var prop schemaNode
		if raw, found := s.Properties[req]; !found || json.Unmarshal(raw, &prop) != nil {
			return nil, false
		}
		v, filled := fillProperty(t.Name, req, prop, wantsFile, writes, conv, rng)
		if !filled {
			return nil, false
		}
		args[req] = v
	}
	return args, true
}

func toolWants(toolName string, words ...string) bool {
	return slices.ContainsFunc(nameWords(toolName), func(w string) bool { return slices.Contains(words, w) })
}

// fillProperty returns a value for one required property, or false.
func fillProperty(toolName, name string, prop schemaNode, wantsFile, writes bool, conv *conversation, rng *rand.Rand) (any, bool) {
	if prop.Const != nil {
		return prop.Const, true
	}
	typ := schemaType(prop)
	if typ != "string" {
		if prop.Default != nil {
			return prop.Default, true
		}
		return nil, false // a number, object or array it has no source for
	}
	v, ok := fillString(toolName, strings.Join(nameWords(name), "_"), wantsFile, writes, conv, rng)
	if !ok && prop.Default != nil {
		return prop.Default, true
	}
	if ok && len(prop.Enum) > 0 && !slices.Contains(prop.Enum, any(v)) {
		return nil, false
	}
	return v, ok
}

// fillString fills a string property by its name (words joined with "_").
// A writing tool's file is a new one of the model's own, never a file the
// conversation shows.
func fillString(toolName, name string, wantsFile, writes bool, conv *conversation, rng *rand.Rand) (string, bool) {
	pick := func(list []string) (string, bool) {
		if len(list) == 0 {
			return "", false
		}
		return list[rng.IntN(len(list))], true
	}
	switch name {
	case "file_path", "filepath", "file", "filename", "file_name", "absolute_path", "target_file", "path":
		if writes {
			return path.Join(cmp.Or(conv.WorkDir, "."), simNotesFile), true
		}
		if wantsFile {
			return pick(conv.Files)
		}
		if name == "path" {
			return pick(conv.Dirs)
		}
		return pick(conv.Files)
	case "dir", "directory", "dir_path", "dirpath", "cwd", "workdir", "root", "folder":
		return pick(conv.Dirs)
	case "pattern", "glob", "include", "file_pattern":
		if name == "pattern" && toolWants(toolName, "grep", "search", "find") && !toolWants(toolName, "glob") {
			return pick(conv.Words)
		}
		return globFor(conv, rng), true
	case "query", "regex", "search", "search_term", "q", "keyword", "text":
		return pick(conv.Words)
	case "description", "reason", "justification", "summary":
		return "look around the repository", true
	case "command", "cmd":
		return commandFor(conv, rng)
	case "content", "contents":
		return "Notes from Hearth's simulated model.\n", true
	}
	return "", false
}

// simNotesFile is the file a writing tool writes when allowed.
const simNotesFile = "hearth-sim-notes.md"

// globFor makes a glob over an extension the conversation shows, or all
// files.
func globFor(conv *conversation, rng *rand.Rand) string {
	var exts []string
	for _, f := range conv.Files {
		if e := path.Ext(f); e != "" && !slices.Contains(exts, e) {
			exts = append(exts, e)
		}
	}
	if len(exts) == 0 {
		return "**/*"
	}
	return "**/*" + exts[rng.IntN(len(exts))]
}

// commandFor makes a shell command that only looks, for tools that run
// commands (only called when writing tools are allowed).
func commandFor(conv *conversation, rng *rand.Rand) (string, bool) {
	switch {
	case len(conv.Files) > 0 && rng.IntN(2) == 0:
		return "cat " + shellQuote(conv.Files[rng.IntN(len(conv.Files))]), true
	case len(conv.Dirs) > 0:
		return "ls -la " + shellQuote(conv.Dirs[rng.IntN(len(conv.Dirs))]), true
	}
	return "ls -la", true
}

func shellQuote(s string) string {
	if strings.IndexFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("/._-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plannedCall is one call the model may make.
type plannedCall struct {
	Name string
	Args string // JSON object
}

// candidateCalls lists the calls the model may make this turn: each usable
// tool filled a few times, calls not yet made in the task first.
func candidateCalls(tools []toolSpec, conv *conversation, allowWrite bool, rng *rand.Rand) []plannedCall {
	var fresh, repeated []plannedCall
	for _, t := range tools {
		switch classifyTool(t.Name) {
		case toolReadOnly:
		case toolWriting:
			if !allowWrite {
				continue
			}
		default:
			continue
		}
		for range 3 {
			args, ok := fillArguments(t, conv, rng)
			if !ok {
				break
			}
			b, err := json.Marshal(args)
			if err != nil {
				break
			}
			c := plannedCall{Name: t.Name, Args: string(b)}
			switch {
			case slices.Contains(fresh, c) || slices.Contains(repeated, c):
			case conv.Called[callKey(c.Name, c.Args)]:
				repeated = append(repeated, c)
			default:
				fresh = append(fresh, c)
			}
		}
	}
	if len(fresh) > 0 {
		return fresh
	}
	return repeated
}

// finalAnswer is the answer that ends a task: it says the model is
// simulated and what it looked at, then a few sentences of filler so the
// answer has a plausible length.
func finalAnswer(rng *rand.Rand, conv *conversation, allowWrite bool) string {
	var b strings.Builder
	b.WriteString("This answer comes from Hearth's simulated model, not a real one: it only plays an agent")
	if conv != nil && conv.ToolTurns > 0 {
		calls := "calls"
		if conv.ToolTurns == 1 {
			calls = "call"
		}
		fmt.Fprintf(&b, " (%d tool %s in this task", conv.ToolTurns, calls)
		if !allowWrite {
			b.WriteString(", nothing written")
		}
		b.WriteString(")")
	}
	b.WriteString(". ")
	b.WriteString(prose(rng, 1+rng.IntN(4)))
	return b.String()
}
