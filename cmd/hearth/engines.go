package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gofiber/fiber/v2"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// engineJSON is one engine in GET /api/v1/engines.
type engineJSON struct {
	Name      string `json:"name"`
	Runtime   string `json:"runtime"`
	Kind      string `json:"kind"`
	Model     string `json:"model"`
	GPU       int    `json:"gpu"`
	GPUName   string `json:"gpu_name,omitempty"`
	State     string `json:"state"`
	PID       int    `json:"pid,omitempty"`
	Container string `json:"container,omitempty"`
	Image     string `json:"image,omitempty"`
	BaseURL   string `json:"base_url"`
	Restarts  int    `json:"restarts"`
	// Phase and Progress say where a loading engine's start is
	// (runtime.LoadPhase; percent of the phase), when its log tells.
	Phase    string `json:"phase,omitempty"`
	Progress *int   `json:"progress,omitempty"`
	// LastError ends with the diagnosis's fix when Cause names one
	// (runtime.Cause: "out_of_memory", "gated_model", …).
	LastError string    `json:"last_error"`
	Cause     string    `json:"cause,omitempty"`
	Since     time.Time `json:"since"`
	KVBlocks  int       `json:"kv_blocks,omitempty"`
}

func engineJSONOf(st hruntime.Status) engineJSON {
	e := engineJSON{
		Name: st.Name, Runtime: st.Runtime, Kind: string(st.Engine), Model: st.Model,
		GPU: st.GPU.Index, GPUName: st.GPU.Name, State: string(st.State),
		PID: st.PID, Container: st.Container, Image: st.Image, BaseURL: st.BaseURL, Restarts: st.Restarts,
		Phase: string(st.Load.Phase), LastError: st.LastError, Cause: string(st.Diagnosis.Cause),
		Since: st.Since.UTC(), KVBlocks: st.Profile.GPUBlocks,
	}
	if st.Load.Phase != "" && st.Load.Progress >= 0 {
		p := st.Load.Progress
		e.Progress = &p
	}
	return e
}

// stateText is an engine's state as `hearth engines` prints it: with the
// phase of its start while it loads ("loading: capturing CUDA graphs 40%").
func (e engineJSON) stateText() string {
	if e.Phase == "" {
		return e.State
	}
	s := e.State + ": " + hruntime.LoadPhase(e.Phase).Label()
	if e.Progress != nil {
		s += fmt.Sprintf(" %d%%", *e.Progress)
	}
	return s
}

// enginesHandler serves GET /api/v1/engines.
func enginesHandler(engines func() []hruntime.Status) fiber.Handler {
	return func(c *fiber.Ctx) error {
		statuses := engines()
		out := make([]engineJSON, len(statuses))
		for i, st := range statuses {
			out[i] = engineJSONOf(st)
		}
		return c.JSON(fiber.Map{"engines": out})
	}
}

// engineLogsHandler serves GET /api/v1/engines/:name/logs: the engine's last
// output lines, as text. With ?follow=1 it sends them and then every new
// line as it comes, as server-sent events: a "data:" field per line, an
// "event: restart" when the engine is launched again (its new run's lines
// follow), and a comment every heartbeat. The stream ends when the client
// goes (a write fails: the heartbeat makes sure one is tried) or the
// daemon stops.
func engineLogsHandler(sup *hruntime.Supervisor) fiber.Handler {
	return logsHandler{sup: sup, heartbeat: 15 * time.Second, writeTimeout: 10 * time.Second}.serve
}

type logsHandler struct {
	sup          *hruntime.Supervisor
	heartbeat    time.Duration
	writeTimeout time.Duration // a client that stops reading is dropped after it
}

func (h logsHandler) serve(c *fiber.Ctx) error {
	// The name outlives the handler in a followed stream: copy it out of
	// fasthttp's request buffer, which the next request reuses.
	name := strings.Clone(c.Params("name"))
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	notFound := func() error {
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": fmt.Sprintf("no engine named %q", name)})
	}
	if !c.QueryBool("follow") {
		lines, ok := h.sup.Logs(name)
		if !ok {
			return notFound()
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		if len(lines) == 0 {
			return c.SendString("")
		}
		return c.SendString(strings.Join(lines, "\n") + "\n")
	}
	page, ok := h.sup.LogsAfter(name, hruntime.LogCursor{})
	if !ok {
		return notFound()
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no")
	conn := c.Context().Conn()
	shutdown := c.Context().Done() // closed when the daemon stops serving
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer conn.SetWriteDeadline(time.Time{})
		send := func(b []byte) bool {
			// The deadline is on the network, so real time.
			if err := conn.SetWriteDeadline(time.Now().Add(h.writeTimeout)); err != nil {
				return false
			}
			if _, err := w.Write(b); err != nil {
				return false
			}
			return w.Flush() == nil
		}
		beat := time.NewTicker(h.heartbeat)
		defer beat.Stop()
		var buf []byte
		for first := true; ; first = false {
			buf = buf[:0]
			if page.NewRun {
				buf = append(buf, "event: restart\ndata: \n\n"...)
			}
			for _, l := range page.Lines { // log lines hold no line breaks
				buf = append(buf, "data: "...)
				buf = append(buf, l...)
				buf = append(buf, "\n\n"...)
			}
			if first && len(buf) == 0 {
				buf = append(buf, ": following\n\n"...) // the client sees the stream open
			}
			if len(buf) > 0 && !send(buf) {
				return
			}
		wait:
			for {
				select {
				case <-page.More: // nil when the runtime cannot tell: never
					break wait
				case <-page.Relaunched:
					break wait
				case <-shutdown:
					return
				case <-beat.C:
					if !send(heartbeatComment) {
						return
					}
				}
			}
			page, _ = h.sup.LogsAfter(name, page.Next)
		}
	})
	return nil
}

var heartbeatComment = []byte(": heartbeat\n\n")

// runEngines prints the engines of a running daemon.
func runEngines(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "engines", "engines [--addr URL] [--json]")
	addr := fs.String("addr", "http://127.0.0.1:8000", "the daemon's address")
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	key := fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var list struct {
		Engines []engineJSON `json:"engines"`
	}
	if printed, err := getDaemonJSON(ctx, env, *addr, "/api/v1/engines", *key, *asJSON, &list); printed || err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tKIND\tMODEL\tGPU\tSTATE\tPID/CONTAINER\tRESTARTS\tSINCE\tLAST ERROR")
	for _, e := range list.Engines {
		pid := "-"
		switch {
		case e.PID > 0:
			pid = fmt.Sprint(e.PID)
		case e.Container != "":
			pid = e.Container
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", e.Name, e.Runtime, e.Kind, e.Model, e.GPU,
			e.stateText(), pid, e.Restarts, e.Since.Local().Format(time.TimeOnly), e.LastError)
	}
	return tw.Flush()
}

// runLogs prints an engine's last output lines and, with -f, the lines
// that follow until interrupted, as tail -f does.
func runLogs(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "logs", "logs ENGINE [-f] [--addr URL]")
	addr := fs.String("addr", "http://127.0.0.1:8000", "the daemon's address")
	key := fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)")
	var follow bool
	fs.BoolVar(&follow, "f", false, "keep printing new lines as the engine writes them")
	fs.BoolVar(&follow, "follow", false, "the same as -f")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: name the engine (hearth engines lists them)", errUsage)
	}
	path := "/api/v1/engines/" + url.PathEscape(name) + "/logs"
	if follow {
		return followLogs(ctx, env, *addr, path+"?follow=1", *key)
	}
	body, err := getDaemon(ctx, env, *addr, path, *key)
	if err != nil {
		return err
	}
	_, err = env.stdout.Write(body)
	return err
}

// followLogs prints a followed log stream until ctx ends (Ctrl-C) or the
// daemon ends it.
func followLogs(ctx context.Context, env *environment, addr, path, key string) error {
	resp, err := requestDaemon(ctx, env, addr, path, key)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "": // the end of an event
			event = ""
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			if event == "restart" {
				fmt.Fprintln(env.stdout, "-- the engine was launched again --")
			}
		case strings.HasPrefix(line, "data: ") && event == "":
			fmt.Fprintln(env.stdout, strings.TrimPrefix(line, "data: "))
		}
	}
	if ctx.Err() != nil {
		return nil // interrupted: the way a follow ends
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}

// getDaemon GETs a path of the daemon's API and returns a 200's body.
func getDaemon(ctx context.Context, env *environment, addr, path, key string) ([]byte, error) {
	resp, err := requestDaemon(ctx, env, addr, path, key)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// getDaemonJSON GETs a path of the daemon's API for a command with --json:
// raw prints the daemon's JSON as it is (printed is then true), else it is
// decoded into v for the command to print as a table.
func getDaemonJSON(ctx context.Context, env *environment, addr, path, key string, raw bool, v any) (printed bool, err error) {
	body, err := getDaemon(ctx, env, addr, path, key)
	if err != nil {
		return false, err
	}
	if raw {
		_, err := env.stdout.Write(body)
		return true, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return false, nil
}

// requestDaemon GETs a path of the daemon's API and returns a 200's
// response, its body unread; any other status is an error saying why.
func requestDaemon(ctx context.Context, env *environment, addr, path, key string) (*http.Response, error) {
	if key == "" {
		key = env.getenv("HEARTH_API_KEY")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: --addr: %v", errUsage, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is hearth up running at %s? %w", addr, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	msg := strings.TrimSpace(string(body))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, errors.New(resp.Status + ": " + msg + " (pass an admin API key with --api-key or $HEARTH_API_KEY)")
	}
	return nil, errors.New(resp.Status + ": " + msg)
}
