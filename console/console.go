package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/assets"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/console/components"
)

// Console is the browser console. Create it with New, mount it with
// Register and run its hub with Run.
type Console struct {
	cfg      Config
	keys     KeyStore
	settings SettingsStore
	health   HealthSource
	cluster  ClusterSource // nil: this node belongs to no cluster
	keyReq   func(ctx context.Context) bool
	keyless  KeylessClients
	clock    clock.Clock
	log      *slog.Logger
	hub      *Hub
	logins   *loginStore
	limiter  *loginLimiter
	owner    ownerState
	// localToken opens /api/v1 to the hearth command (Deps.LocalToken).
	localToken string
	// passwordIterations is PBKDF2's work per new password; tests lower it.
	passwordIterations int

	// peerIP is the address a request came from; tests replace it to act
	// as a remote browser.
	peerIP func(c *fiber.Ctx) net.IP

	// sampleMu serialises the sampler between the hub and handlers that
	// need a snapshot before the hub's first tick.
	sampleMu sync.Mutex
	sampler  *sampler
	latest   *snapshot // guarded by sampleMu
}

// New builds a console. cfg is validated; deps.Keys is required.
func New(cfg Config, deps Deps) (*Console, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Keys == nil {
		return nil, errors.New("console: a key store is required")
	}
	c := &Console{
		cfg:        cfg,
		keys:       deps.Keys,
		settings:   deps.Settings,
		health:     deps.Health,
		cluster:    deps.Cluster,
		keyReq:     deps.KeyRequired,
		keyless:    deps.Keyless,
		localToken: deps.LocalToken,
		clock:      clock.Or(deps.Clock),
		log:        deps.Logger,
		sampler:    newSampler(cfg, deps),
		peerIP:     func(c *fiber.Ctx) net.IP { return c.Context().RemoteIP() },
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("component", "console")
	if c.keyReq == nil {
		c.keyReq = func(ctx context.Context) bool {
			keys, err := c.keys.Keys(ctx)
			// A store that cannot answer is treated as holding keys: failing
			// closed keeps the console off the network.
			return err != nil || len(keys) > 0
		}
	}
	c.logins = newLoginStore(cfg.LoginTTL, cfg.LoginIdle, c.clock)
	c.limiter = newLoginLimiter(c.clock)
	c.passwordIterations = passwordIterations
	if deps.Owner != nil {
		if err := c.owner.load(context.Background(), deps.Owner); err != nil {
			return nil, err
		}
	}
	c.hub = newHub(cfg, c.clock, c.produce)
	return c, nil
}

// Run runs the hub until ctx ends. Live pages need it; static pages work
// without it (they sample on demand).
func (c *Console) Run(ctx context.Context) error { return c.hub.Run(ctx) }

// Hub returns the console's hub, for its counters.
func (c *Console) Hub() *Hub { return c.hub }

// Register mounts the console under Config.BasePath on r (the gateway's
// fiber app). It registers nothing outside that path.
func (c *Console) Register(r fiber.Router) {
	g := r.Group(c.cfg.BasePath, c.secureHeaders)
	g.Use("/static", filesystem.New(filesystem.Config{
		Root:   http.FS(assets.Static),
		MaxAge: 3600,
	}))
	g.Get("/login", c.handleLoginPage)
	g.Post("/login", c.sameOrigin, c.handleLogin)
	g.Post("/logout", c.sameOrigin, c.handleLogout)
	g.Get("/setup", c.handleSetupPage)
	g.Post("/setup", c.sameOrigin, c.handleSetup)

	p := g.Group("", c.authorize)
	p.Get("/", c.handleOverview)
	p.Get("/sessions", c.handleSessions)
	p.Get("/requests", c.handleRequests)
	p.Get("/connect", c.handleConnect)
	p.Get("/settings", c.handleSettings)
	p.Get("/health", c.handleHealth)
	p.Get("/health/checks", c.handleHealthChecks)
	p.Get("/events/:topic", c.handleEvents)
	p.Post("/keys", c.sameOrigin, c.handleCreateKey)
	p.Post("/keys/:id/revoke", c.sameOrigin, c.handleRevokeKey)
	p.Post("/settings", c.sameOrigin, c.handleSaveSettings)
	p.Get("/cluster", c.handleCluster)
	p.Post("/cluster/nodes/:id/revoke", c.sameOrigin, c.ownerOnly, c.handleRevokeNode)
	p.Post("/cluster/joins/:id/accept", c.sameOrigin, c.ownerOnly, c.handleJoin(true))
	p.Post("/cluster/joins/:id/reject", c.sameOrigin, c.ownerOnly, c.handleJoin(false))
}

// produce is the hub's per-tick work: sample, then render what is watched.
func (c *Console) produce(ctx context.Context, now time.Time, want []Topic, emit func(Topic, []byte)) {
	c.sampleMu.Lock()
	snap := c.sampler.collect(ctx, now, true)
	c.latest = snap
	c.sampleMu.Unlock()

	var buf bytes.Buffer
	for _, t := range want {
		buf.Reset()
		if err := c.fragment(ctx, now, t, snap).Render(ctx, &buf); err != nil {
			c.log.Warn("rendering a live update", "topic", string(t), "error", err)
			continue
		}
		emit(t, bytes.Clone(buf.Bytes()))
	}
}

// fragment is the live part of a topic's page. The cluster's is read
// from its source here, not sampled with the rest: it has no history, and
// only its page asks for it.
func (c *Console) fragment(ctx context.Context, now time.Time, t Topic, snap *snapshot) templ.Component {
	switch t {
	case TopicCluster:
		return components.ClusterBody(c.clusterVM(ctx, now))
	case TopicSessions:
		return components.SessionsBody(sessionsVM(c.cfg, snap))
	case TopicRequests:
		return components.RequestsBody(requestsVM(c.cfg, snap))
	default:
		return components.OverviewBody(overviewVM(c.cfg, snap))
	}
}

// snapshot returns the hub's latest sample, or takes one without recording
// history when the hub has not sampled yet.
func (c *Console) snapshot(ctx context.Context) *snapshot {
	c.sampleMu.Lock()
	defer c.sampleMu.Unlock()
	if c.latest != nil {
		return c.latest
	}
	return c.sampler.collect(ctx, c.clock.Now(), false)
}

func (c *Console) layout(fc *fiber.Ctx, title, active string, live Topic) components.Layout {
	l := components.Layout{
		Title:  title,
		Active: active,
		Base:   c.cfg.BasePath,
		Static: c.cfg.BasePath + "/static",
	}
	if live != "" {
		l.LiveURL = c.cfg.BasePath + "/events/" + string(live)
	}
	_, l.LoggedIn = c.logins.get(fc.Cookies(cookieName))
	return l
}

func (c *Console) render(fc *fiber.Ctx, status int, comp templ.Component) error {
	fc.Status(status)
	fc.Type("html", "utf-8")
	fc.Set(fiber.HeaderCacheControl, "no-store")
	return comp.Render(fc.UserContext(), fc.Response().BodyWriter())
}

// plainError answers with a short text, so console errors do not depend
// on the error handler of the app the console is mounted on (the gateway's
// speaks the API's JSON dialects).
func plainError(fc *fiber.Ctx, status int, msg string) error {
	fc.Set(fiber.HeaderCacheControl, "no-store")
	return fc.Status(status).SendString(msg)
}

// secureHeaders keeps the console out of frames and other origins' reach.
func (c *Console) secureHeaders(fc *fiber.Ctx) error {
	fc.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	fc.Set("X-Frame-Options", "DENY")
	fc.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer browsers send
	// "Origin: null" with the console's own forms, which sameOrigin could
	// then not tell from a forged one.
	fc.Set("Referrer-Policy", "same-origin")
	return fc.Next()
}

func (c *Console) handleOverview(fc *fiber.Ctx) error {
	snap := c.snapshot(fc.UserContext())
	return c.render(fc, fiber.StatusOK, components.Overview(c.layout(fc, "Overview", "overview", TopicOverview), overviewVM(c.cfg, snap)))
}

// healthVM runs the health checks, or says why it cannot.
func (c *Console) healthVM(ctx context.Context) components.HealthVM {
	vm := components.HealthVM{Base: c.cfg.BasePath, Available: c.health != nil}
	if c.health == nil {
		return vm
	}
	checks, err := c.health.Checks(ctx)
	if err != nil {
		vm.Err = "Cannot run the checks: " + err.Error()
		return vm
	}
	for _, ch := range checks {
		row := components.HealthRow{Name: ch.Name, Status: ch.Status, Evidence: ch.Evidence, Fix: ch.Fix}
		switch ch.Status {
		case "pass":
			vm.Passed++
		case "warn":
			vm.Warned++
		default:
			vm.Failed++
		}
		vm.Checks = append(vm.Checks, row)
	}
	return vm
}

func (c *Console) handleHealth(fc *fiber.Ctx) error {
	return c.render(fc, fiber.StatusOK, components.Health(c.layout(fc, "Health", "health", ""), c.healthVM(fc.UserContext())))
}

// handleHealthChecks answers the Health page's "Check again" button with
// the checks alone.
func (c *Console) handleHealthChecks(fc *fiber.Ctx) error {
	return c.render(fc, fiber.StatusOK, components.HealthChecks(c.healthVM(fc.UserContext())))
}

func (c *Console) handleSessions(fc *fiber.Ctx) error {
	snap := c.snapshot(fc.UserContext())
	return c.render(fc, fiber.StatusOK, components.Sessions(c.layout(fc, "Sessions", "sessions", TopicSessions), sessionsVM(c.cfg, snap)))
}

func (c *Console) handleRequests(fc *fiber.Ctx) error {
	snap := c.snapshot(fc.UserContext())
	return c.render(fc, fiber.StatusOK, components.Requests(c.layout(fc, "Requests", "requests", TopicRequests), requestsVM(c.cfg, snap)))
}

// apiBaseURL is where clients reach the API: configured, or the origin the
// browser used.
func (c *Console) apiBaseURL(fc *fiber.Ctx) string {
	if c.cfg.APIBaseURL != "" {
		return strings.TrimSuffix(c.cfg.APIBaseURL, "/")
	}
	return fc.Protocol() + "://" + string(fc.Request().Host())
}

func (c *Console) connectVM(fc *fiber.Ctx, createdFor, secret string) components.ConnectVM {
	keyReq := c.keyReq(fc.UserContext())
	vm := components.ConnectVM{BaseURL: c.apiBaseURL(fc), Model: c.cfg.Model, KeyNote: KeyNote(keyReq)}
	for _, cl := range agentclient.Clients {
		s := ""
		if cl.ID == createdFor {
			s = secret
		}
		vm.Clients = append(vm.Clients, clientSnippetVM(c.cfg.BasePath, vm.BaseURL, c.cfg, cl, s, keyReq))
	}
	return vm
}

// keylessWindow is how far back the first key's confirmation looks for
// clients that used the API without a key; the page says "the last hour".
const keylessWindow = time.Hour

// firstKeyVM is the confirmation the first key needs: it lists the
// clients it will lock out. id is the element it replaces.
func (c *Console) firstKeyVM(fc *fiber.Ctx, id, name, clientID string) components.FirstKeyVM {
	vm := components.FirstKeyVM{ID: id, Base: c.cfg.BasePath, Name: name, Client: clientID}
	vm.Cancel = c.cfg.BasePath + "/settings"
	if clientID != "" {
		vm.Cancel = c.cfg.BasePath + "/connect"
	}
	if c.keyless == nil {
		return vm
	}
	now := c.clock.Now()
	seen, err := c.keyless.ClientsWithoutKey(fc.UserContext(), now.Add(-keylessWindow))
	if err != nil {
		vm.Err = "Cannot tell which clients used the API: " + err.Error()
		return vm
	}
	slices.SortFunc(seen, func(a, b KeylessClient) int { return b.LastSeen.Compare(a.LastSeen) })
	for _, s := range seen {
		ago := "just now"
		if d := now.Sub(s.LastSeen); d >= 5*time.Second {
			ago = fmtAgo(d) + " ago"
		}
		vm.Clients = append(vm.Clients, components.SeenClient{Name: s.Client, Ago: ago})
	}
	return vm
}

func (c *Console) handleConnect(fc *fiber.Ctx) error {
	return c.render(fc, fiber.StatusOK, components.Connect(c.layout(fc, "Connect", "connect", ""), c.connectVM(fc, "", "")))
}

func (c *Console) settingsVM(ctx context.Context) components.SettingsVM {
	vm := components.SettingsVM{Base: c.cfg.BasePath}
	if c.settings == nil {
		vm.Err = "Settings are not editable in this build."
	} else if s, err := c.settings.Settings(ctx); err != nil {
		vm.Err = "Cannot read settings: " + err.Error()
	} else {
		vm.Policy, vm.Policies, vm.Models = s.Policy, s.Policies, s.Models
		vm.AliasesText = formatAliases(s.Aliases)
	}
	keys, err := c.keys.Keys(ctx)
	if err != nil {
		vm.KeysErr = "Cannot list keys: " + err.Error()
	}
	for _, k := range keys {
		vm.Keys = append(vm.Keys, components.KeyRow{
			ID: k.ID, Name: k.Name, Hint: k.Hint, Scope: k.Scope,
			Created:  k.Created.In(c.cfg.Location).Format("2006-01-02 15:04"),
			LastUsed: lastUsed(k.LastUsed, c.cfg.Location),
		})
	}
	return vm
}

func (c *Console) handleSettings(fc *fiber.Ctx) error {
	return c.render(fc, fiber.StatusOK, components.Settings(c.layout(fc, "Settings", "settings", ""), c.settingsVM(fc.UserContext())))
}

func (c *Console) handleSaveSettings(fc *fiber.Ctx) error {
	ctx := fc.UserContext()
	l := c.layout(fc, "Settings", "settings", "")
	if c.settings == nil {
		return c.render(fc, fiber.StatusNotFound, components.Settings(l, c.settingsVM(ctx)))
	}
	cur, err := c.settings.Settings(ctx)
	if err != nil {
		vm := c.settingsVM(ctx)
		return c.render(fc, fiber.StatusInternalServerError, components.Settings(l, vm))
	}
	next := cur
	next.Policy = strings.Clone(fc.FormValue("policy")) // fiber reuses the request buffer
	aliases, err := parseAliases(strings.Clone(fc.FormValue("aliases")))
	if err == nil {
		next.Aliases = aliases
		err = c.settings.SaveSettings(ctx, next)
	}
	if err != nil {
		vm := c.settingsVM(ctx)
		// Show what was typed, not what is stored, so it can be fixed.
		vm.Policy, vm.AliasesText = next.Policy, fc.FormValue("aliases")
		status := fiber.StatusUnprocessableEntity
		if !errors.Is(err, errAliasSyntax) && !errors.Is(err, ErrInvalidSettings) {
			status = fiber.StatusInternalServerError
			c.log.Warn("saving settings", "error", err)
		}
		vm.Err = "Not saved: " + err.Error()
		return c.render(fc, status, components.Settings(l, vm))
	}
	vm := c.settingsVM(ctx)
	vm.Saved = true
	return c.render(fc, fiber.StatusOK, components.Settings(l, vm))
}

// handleCreateKey creates a key. From the Connect page (field client) it
// answers with that client's card, with the key in its settings; otherwise
// with the Settings page. Either way the secret is shown this once.
func (c *Console) handleCreateKey(fc *fiber.Ctx) error {
	ctx := fc.UserContext()
	name := strings.Clone(strings.TrimSpace(fc.FormValue("name")))
	cl, forClient := clientByID(fc.FormValue("client"))
	if name == "" || len(name) > 64 {
		if forClient {
			vm := clientSnippetVM(c.cfg.BasePath, c.apiBaseURL(fc), c.cfg, cl, "", c.keyReq(ctx))
			vm.Err = "A key needs a name of 1 to 64 characters."
			return c.render(fc, fiber.StatusUnprocessableEntity, components.ClientCard(vm))
		}
		vm := c.settingsVM(ctx)
		vm.KeysErr = "A key needs a name of 1 to 64 characters."
		return c.render(fc, fiber.StatusUnprocessableEntity, components.Settings(c.layout(fc, "Settings", "settings", ""), vm))
	}
	wasOpen := !c.keyReq(ctx)
	if wasOpen && fc.FormValue("confirm") != "yes" {
		// The first key closes the API: say whom that locks out before it
		// takes effect.
		id := "first-key"
		if forClient {
			id = "client-" + cl.ID
		}
		vm := c.firstKeyVM(fc, id, name, cl.ID)
		if fc.Get("HX-Request") == "true" {
			return c.render(fc, fiber.StatusOK, components.FirstKeyConfirm(vm))
		}
		return c.render(fc, fiber.StatusOK, components.FirstKeyPage(c.layout(fc, "Create the first key", "connect", ""), vm))
	}
	scope := fc.FormValue("scope")
	switch {
	case scope == "":
		scope = apikey.ScopeInference // what clients' keys need
	case !apikey.ValidScope(scope):
		return plainError(fc, fiber.StatusUnprocessableEntity, "unknown key scope")
	}
	key, secret, err := c.keys.CreateScopedKey(ctx, name, scope)
	if err != nil {
		c.log.Warn("creating an API key", "error", err)
		msg := "Could not create the key: " + err.Error()
		if forClient {
			vm := clientSnippetVM(c.cfg.BasePath, c.apiBaseURL(fc), c.cfg, cl, "", !wasOpen)
			vm.Err = msg
			return c.render(fc, fiber.StatusInternalServerError, components.ClientCard(vm))
		}
		vm := c.settingsVM(ctx)
		vm.KeysErr = msg
		return c.render(fc, fiber.StatusInternalServerError, components.Settings(c.layout(fc, "Settings", "settings", ""), vm))
	}
	// The first key closes the open loopback console; log this browser in
	// with it so that creating a key does not lock its creator out.
	if _, ok := c.logins.get(fc.Cookies(cookieName)); !ok && wasOpen {
		c.startLogin(fc, key.ID)
	}
	if forClient {
		if fc.Get("HX-Request") == "true" {
			return c.render(fc, fiber.StatusOK, components.ClientCard(clientSnippetVM(c.cfg.BasePath, c.apiBaseURL(fc), c.cfg, cl, secret, true)))
		}
		return c.render(fc, fiber.StatusOK, components.Connect(c.layout(fc, "Connect", "connect", ""), c.connectVM(fc, cl.ID, secret)))
	}
	vm := c.settingsVM(ctx)
	vm.NewKey = &components.NewKeyVM{Name: key.Name, Secret: secret}
	return c.render(fc, fiber.StatusOK, components.Settings(c.layout(fc, "Settings", "settings", ""), vm))
}

func (c *Console) handleRevokeKey(fc *fiber.Ctx) error {
	ctx := fc.UserContext()
	id := fc.Params("id")
	err := c.keys.RevokeKey(ctx, id)
	status := fiber.StatusOK
	vm := c.settingsVM(ctx)
	switch {
	case errors.Is(err, ErrNoSuchKey):
		status = fiber.StatusNotFound
		vm.KeysErr = "No such key."
	case err != nil:
		status = fiber.StatusInternalServerError
		c.log.Warn("revoking an API key", "error", err)
		vm.KeysErr = "Could not revoke the key: " + err.Error()
	default:
		c.logins.revokeKey(id)
		if _, ok := c.logins.get(fc.Cookies(cookieName)); !ok && c.keyReq(ctx) {
			// This browser was logged in with the key it just revoked.
			return fc.Redirect(c.cfg.BasePath+"/login", fiber.StatusSeeOther)
		}
	}
	return c.render(fc, status, components.Settings(c.layout(fc, "Settings", "settings", ""), vm))
}

// lastUsed formats a key's last use.
func lastUsed(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "never"
	}
	return t.In(loc).Format("2006-01-02 15:04")
}
