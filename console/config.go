package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// Config is the console's configuration. Zero values take the defaults
// documented on each field; Validate reports what cannot work.
type Config struct {
	// BasePath is where the console lives on the fiber app. Default
	// "/console". It must start with "/" and not end with one.
	BasePath string
	// APIBaseURL is the address clients use for the API, shown on the
	// Connect page ("http://workstation.lan:8080"). Default: the scheme and
	// host the browser used to reach the console.
	APIBaseURL string
	// Model is the model name put into client settings. Default "hearth"
	// (the gateway maps unknown names to the served model).
	Model string
	// ContextTokens is the served model's context length; when set, client
	// settings tell the clients, so they compact their history before the
	// engine refuses it. 0 leaves it out.
	ContextTokens int
	// Layout names the engines' layout ("tp2, fp8 KV, yarn") and
	// LayoutReason says why it was chosen; the Overview shows them. Empty
	// leaves them out.
	Layout       string
	LayoutReason string

	// Interval is how often sources are sampled and pages pushed. Default 2s.
	Interval time.Duration
	// Heartbeat is how often an idle SSE stream gets a comment, which is
	// also how a vanished browser is noticed. Default 15s.
	Heartbeat time.Duration
	// SubscriberBuffer is how many pushed updates a browser may lag behind
	// before further ones are dropped (and counted). Default 4.
	SubscriberBuffer int
	// MaxSubscribers bounds open SSE streams; more get 503. Default 64.
	MaxSubscribers int
	// WriteTimeout is how long the network may take to accept one pushed
	// update before the stream is given up (a browser that holds its
	// connection but stopped reading). Default 30s.
	WriteTimeout time.Duration

	// StatsWindow is the window of the cluster totals (TTFT percentiles,
	// prefill saved, hit rate). Default 5 min.
	StatsWindow time.Duration
	// ChartWindow and ChartPoints shape the hit-rate charts. Defaults 10 min
	// and 30 points (20 s each).
	ChartWindow time.Duration
	ChartPoints int
	// TelemetrySamples is how many GPU readings (utilisation, temperature,
	// power, memory) each card's sparklines hold, one per Interval.
	// Default 60 (two minutes at the default interval).
	TelemetrySamples int

	// DecisionsShown is how many routing decisions the Requests page lists.
	// Default 50. DecisionScan is how many the sampler reads per tick to
	// count predicted hits; default 1000 (a tick's worth at a few hundred
	// requests a second).
	DecisionsShown int
	DecisionScan   int
	// SessionsShown and TurnsShown cap the Sessions page: the most recently
	// active sessions, and the latest turns of each. Defaults 50 and 12.
	SessionsShown int
	TurnsShown    int
	// TransitionsShown is how many of the models' latest loads, wakes,
	// sleeps and stops the overview's timeline lists. Default 12.
	TransitionsShown int

	// PrefillTokensPerSec converts cached tokens into prefill seconds saved
	// for engines that do not report their own speed. Default 5000.
	PrefillTokensPerSec float64

	// LoginTTL is how long a console login lasts at most. Default 24h.
	LoginTTL time.Duration
	// LoginIdle ends a login unused for this long. Default 12h.
	LoginIdle time.Duration
	// SecureCookie marks the login cookie Secure (set it behind TLS).
	SecureCookie bool
	// Location is the time zone of displayed times. Default time.Local.
	Location *time.Location
}

// Deps are the console's collaborators. Keys is required; a nil source
// leaves its part of the console empty.
type Deps struct {
	Engines  EngineSource
	Router   RouterSource
	Traffic  TrafficSource
	Keys     KeyStore
	Settings SettingsStore // nil: the Settings page shows keys only
	Health   HealthSource  // nil: the Health page says checks are not available
	// KVStores reports the nodes' SSD stores; nil: the overview shows no
	// store panels and no SSD bars.
	KVStores KVStoreSource
	// Models reports the models served on demand; nil: the overview shows
	// no models panel.
	Models ModelSource
	// Cluster reports the LAN cluster this node belongs to; nil: it
	// belongs to none, and the Cluster page says how to create one.
	Cluster ClusterSource

	// KeyRequired reports whether the API requires a key right now; when it
	// does, the console requires a login with a key. nil means "when
	// Keys lists at least one key".
	KeyRequired func(ctx context.Context) bool
	// Keyless names the clients that used the API without a key, whom the
	// first key locks out; creating it asks for a confirmation that lists
	// them. nil: the confirmation lists none.
	Keyless KeylessClients
	// Owner keeps the console owner's password. With it, a first-run
	// setup token (SetupToken) sets the password, and once one is set
	// every page needs a login with it, on loopback too. nil: no owner;
	// the console is open on loopback and needs a key login otherwise.
	Owner OwnerStore
	// LocalToken opens /api/v1 to the hearth command on this machine: a
	// request from loopback whose LocalTokenHeader holds it passes the
	// Guard, state-changing or not. The daemon writes it to a file in its
	// data directory that only its user reads. "": no such token.
	LocalToken string

	Clock  clock.Clock  // nil: real time
	Logger *slog.Logger // nil: slog.Default()
}

func (c *Config) setDefaults() {
	if c.BasePath == "" {
		c.BasePath = "/console"
	}
	if c.Model == "" {
		c.Model = "hearth"
	}
	setDefault(&c.Interval, 2*time.Second)
	setDefault(&c.Heartbeat, 15*time.Second)
	setDefault(&c.SubscriberBuffer, 4)
	setDefault(&c.MaxSubscribers, 64)
	setDefault(&c.WriteTimeout, 30*time.Second)
	setDefault(&c.StatsWindow, 5*time.Minute)
	setDefault(&c.ChartWindow, 10*time.Minute)
	setDefault(&c.ChartPoints, 30)
	setDefault(&c.TelemetrySamples, 60)
	setDefault(&c.DecisionsShown, 50)
	setDefault(&c.DecisionScan, 1000)
	setDefault(&c.SessionsShown, 50)
	setDefault(&c.TurnsShown, 12)
	setDefault(&c.TransitionsShown, 12)
	setDefault(&c.PrefillTokensPerSec, 5000)
	setDefault(&c.LoginTTL, 24*time.Hour)
	setDefault(&c.LoginIdle, 12*time.Hour)
	if c.Location == nil {
		c.Location = time.Local
	}
}

func setDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if !strings.HasPrefix(c.BasePath, "/") || (len(c.BasePath) > 1 && strings.HasSuffix(c.BasePath, "/")) {
		return fmt.Errorf("console: config: base path %q must start with / and not end with one", c.BasePath)
	}
	if c.BasePath == "/" {
		return errors.New(`console: config: base path "/" would shadow the API; use "" for the default or a sub-path`)
	}
	if c.ChartWindow < c.Interval {
		return fmt.Errorf("console: config: chart window %v is shorter than the interval %v", c.ChartWindow, c.Interval)
	}
	if c.ChartWindow/time.Duration(max(c.ChartPoints, 1)) < c.Interval {
		return fmt.Errorf("console: config: %d chart points over %v are shorter than the interval %v", c.ChartPoints, c.ChartWindow, c.Interval)
	}
	if c.APIBaseURL != "" && !strings.HasPrefix(c.APIBaseURL, "http://") && !strings.HasPrefix(c.APIBaseURL, "https://") {
		return fmt.Errorf("console: config: API base URL %q must start with http:// or https://", c.APIBaseURL)
	}
	return nil
}
