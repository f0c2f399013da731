package adminapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Client speaks to a running daemon's API.
type Client struct {
	base   string // without a trailing slash
	apiKey string
	// localToken, when not "", is sent in LocalTokenHeader.
	localToken string
	http       *http.Client
}

// NewClient returns a client of the daemon at baseURL (http://HOST:PORT
// or https://…). apiKey, when not "", is sent as a bearer token (the API
// wants an admin key when the daemon has keys). hc nil is
// http.DefaultClient.
func NewClient(baseURL, apiKey string, hc *http.Client) (*Client, error) {
	base := strings.TrimRight(baseURL, "/")
	if _, err := url.Parse(base); err != nil {
		return nil, err // a *url.Error, which says what and why
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: base, apiKey: apiKey, http: hc}, nil
}

// SetLocalToken makes the client send the daemon's local token (see
// LocalTokenFile) with each request: what proves a state-changing request
// comes from this machine's command line when no admin key is given.
func (c *Client) SetLocalToken(token string) { c.localToken = token }

// HTTPClientTrusting returns an HTTP client that trusts the system's roots
// and the CA certificates in caFile: Hearth's own CA, which hearth up
// --tls auto keeps as tls/ca.pem under its data directory. A caFile that
// does not exist adds nothing (the daemon serves plain HTTP or a
// certificate the system trusts).
func HTTPClientTrusting(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if errors.Is(err, fs.ErrNotExist) {
		return http.DefaultClient, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adminapi: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("adminapi: %s holds no PEM certificate", caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t}, nil
}

// Error is the daemon's answer with a status other than 200.
type Error struct {
	StatusCode int
	Status     string // as the response's status line has it: "404 Not Found"
	// Message is the server's: the "error" of a JSON error answer (or its
	// "error"."message"), else the body as it is.
	Message string
}

func (e *Error) Error() string { return e.Status + ": " + e.Message }

// Is matches ErrNotFound and ErrConflict by the status.
func (e *Error) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == http.StatusNotFound ||
		target == ErrConflict && e.StatusCode == http.StatusConflict
}

// Engines is GET /api/v1/engines.
func (c *Client) Engines(ctx context.Context) (EngineList, error) {
	var v EngineList
	raw, err := c.getJSON(ctx, "/api/v1/engines", &v)
	v.Raw = raw
	return v, err
}

// Sessions is GET /api/v1/sessions.
func (c *Client) Sessions(ctx context.Context) (SessionList, error) {
	var v SessionList
	raw, err := c.getJSON(ctx, "/api/v1/sessions", &v)
	v.Raw = raw
	return v, err
}

// Nodes is GET /api/v1/nodes.
func (c *Client) Nodes(ctx context.Context) (NodeList, error) {
	var v NodeList
	raw, err := c.getJSON(ctx, "/api/v1/nodes", &v)
	v.Raw = raw
	return v, err
}

// NodeDrain is GET /api/v1/node: whether this node takes new requests.
func (c *Client) NodeDrain(ctx context.Context) (NodeDrain, error) {
	var v NodeDrain
	raw, err := c.getJSON(ctx, "/api/v1/node", &v)
	v.Raw = raw
	return v, err
}

// Drain is POST /api/v1/node/drain, or /api/v1/node/undrain with undo:
// the node's drain by hand begins or ends.
func (c *Client) Drain(ctx context.Context, undo bool) (NodeDrain, error) {
	path := "/api/v1/node/drain"
	if undo {
		path = "/api/v1/node/undrain"
	}
	var v NodeDrain
	raw, err := c.call(ctx, http.MethodPost, path, &v)
	v.Raw = raw
	return v, err
}

// JoinRequests is GET /api/v1/cluster/join-requests.
func (c *Client) JoinRequests(ctx context.Context) (JoinRequestList, error) {
	var v JoinRequestList
	raw, err := c.getJSON(ctx, "/api/v1/cluster/join-requests", &v)
	v.Raw = raw
	return v, err
}

// Logs is GET /api/v1/engines/NAME/logs: the engine's last output lines,
// each ending in a line break.
func (c *Client) Logs(ctx context.Context, engine string) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, logsPath(engine))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return string(body), err
}

// LogEvent is one event of a followed log: a line the engine wrote, or
// Restart when it was launched again (its new run's lines follow).
type LogEvent struct {
	Line    string
	Restart bool
}

// FollowLogs is GET /api/v1/engines/NAME/logs?follow=1: it calls each
// with the engine's last lines and then every line it writes, until the
// daemon ends the stream (nil) or ctx ends (ctx's error).
func (c *Client) FollowLogs(ctx context.Context, engine string, each func(LogEvent)) error {
	resp, err := c.do(ctx, http.MethodGet, logsPath(engine)+"?follow=1")
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
				each(LogEvent{Restart: true})
			}
		case strings.HasPrefix(line, "data: ") && event == "":
			each(LogEvent{Line: strings.TrimPrefix(line, "data: ")})
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("adminapi: logs of %s: %w", engine, err)
	}
	return nil
}

// Models is GET /api/v1/models.
func (c *Client) Models(ctx context.Context) (ModelList, error) {
	var v ModelList
	raw, err := c.getJSON(ctx, "/api/v1/models", &v)
	v.Raw = raw
	return v, err
}

// ModelAction is POST /api/v1/models/NAME/ACTION: load, unload, pin or
// unpin.
func (c *Client) ModelAction(ctx context.Context, name, action string) (Outcome, error) {
	return c.post(ctx, "/api/v1/models/"+url.PathEscape(name)+"/"+url.PathEscape(action))
}

// Revoke is POST /api/v1/nodes/ID/revoke.
func (c *Client) Revoke(ctx context.Context, nodeID string) (Outcome, error) {
	return c.post(ctx, "/api/v1/nodes/"+url.PathEscape(nodeID)+"/revoke")
}

// Leave is POST /api/v1/cluster/leave.
func (c *Client) Leave(ctx context.Context) (Outcome, error) {
	return c.post(ctx, "/api/v1/cluster/leave")
}

// Accept is POST /api/v1/cluster/join-requests/ID/accept.
func (c *Client) Accept(ctx context.Context, requestID string) (Outcome, error) {
	return c.post(ctx, "/api/v1/cluster/join-requests/"+url.PathEscape(requestID)+"/accept")
}

// Reject is POST /api/v1/cluster/join-requests/ID/reject.
func (c *Client) Reject(ctx context.Context, requestID string) (Outcome, error) {
	return c.post(ctx, "/api/v1/cluster/join-requests/"+url.PathEscape(requestID)+"/reject")
}

func logsPath(engine string) string { return "/api/v1/engines/" + url.PathEscape(engine) + "/logs" }

func (c *Client) post(ctx context.Context, path string) (Outcome, error) {
	var v Outcome
	raw, err := c.call(ctx, http.MethodPost, path, &v)
	v.Raw = raw
	return v, err
}

func (c *Client) getJSON(ctx context.Context, path string, v any) ([]byte, error) {
	return c.call(ctx, http.MethodGet, path, v)
}

// call sends a request and decodes a 200's JSON body into v; it returns
// the body as it came.
func (c *Client) call(ctx context.Context, method, path string, v any) ([]byte, error) {
	resp, err := c.do(ctx, method, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("adminapi: %s: %w", path, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return body, fmt.Errorf("%s: %w", path, err)
	}
	return body, nil
}

// do sends a request and returns a 200's response, its body unread; any
// other status is an *Error. A request the daemon never answered returns
// the *url.Error of net/http.
func (c *Client) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("adminapi: %w", err)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.localToken != "" {
		req.Header.Set(LocalTokenHeader, c.localToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("adminapi: %s: %w", path, err)
	}
	return nil, &Error{StatusCode: resp.StatusCode, Status: resp.Status, Message: serverMessage(body)}
}

// serverMessage is the message of an error answer: the console's
// {"error": "…"}, the gateway's {"error": {"message": "…"}}, else the
// body as it is.
func serverMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &o) == nil && o.Message != "" {
			return o.Message
		}
	}
	return strings.TrimSpace(string(body))
}
