package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/router"
)

// aliasSetter puts model aliases in place while the gateway runs
// (api.Models, which the gateway resolves names with).
type aliasSetter interface {
	SetAliases(map[string]string) error
}

// settingsStore holds the settings the console edits and applies them at
// once: the routing policy to requests that name none (gatewayRouter
// asks Policy on every request), the aliases through the gateway. A save
// also goes to the database, where the next start finds it.
type settingsStore struct {
	db       *store.SQLite
	policies []string // read only
	models   []string // read only
	resolver aliasSetter

	saveMu sync.Mutex // held through a save, so that saves do not interleave

	mu      sync.RWMutex // guards the fields below; written with saveMu held too
	policy  string
	aliases []console.Alias
}

var _ console.SettingsStore = (*settingsStore)(nil)

// newSettingsStore starts from the settings saved in the console when
// there are any, and from the command line's policy and aliases when
// there are none. Saved settings that no longer fit (an alias to a model
// that is not served since --model changed) are left in the database
// but not used, and a warning says so.
func newSettingsStore(ctx context.Context, db *store.SQLite, log *slog.Logger, policy string, models []string, aliases map[string]string, resolver aliasSetter) (*settingsStore, error) {
	s := &settingsStore{
		db: db, policies: router.PolicyNames(), models: slices.Clone(models), resolver: resolver,
		policy: policy, aliases: aliasList(aliases),
	}
	if err := s.load(ctx, log); err != nil {
		return nil, err
	}
	if err := resolver.SetAliases(aliasMap(s.aliases)); err != nil {
		return nil, fmt.Errorf("--alias: %w", err)
	}
	return s, nil
}

// load replaces the command line's settings with those saved in the
// console, when they fit.
func (s *settingsStore) load(ctx context.Context, log *slog.Logger) error {
	db := s.db
	saved, ok, err := db.Settings(ctx)
	if err != nil || !ok {
		return err
	}
	savedAliases := make([]console.Alias, len(saved.Aliases))
	for i, a := range saved.Aliases {
		savedAliases[i] = console.Alias{From: a.From, To: a.To}
	}
	if err := s.check(saved.Policy, savedAliases); err != nil {
		log.Warn("ignoring the settings saved in the console; using the command line's", "error", err)
		return nil
	}
	log.Info("using the settings saved in the console instead of --policy and --alias",
		"policy", saved.Policy, "aliases", len(savedAliases))
	s.policy, s.aliases = saved.Policy, savedAliases
	return nil
}

// aliasList turns --alias flags into the console's list, sorted by name.
func aliasList(aliases map[string]string) []console.Alias {
	out := make([]console.Alias, 0, len(aliases))
	for _, from := range slices.Sorted(maps.Keys(aliases)) {
		out = append(out, console.Alias{From: from, To: aliases[from]})
	}
	return out
}

// aliasMap is the gateway's form of aliases; check has refused duplicates.
func aliasMap(aliases []console.Alias) map[string]string {
	m := make(map[string]string, len(aliases))
	for _, a := range aliases {
		m[a.From] = a.To
	}
	return m
}

// check reports settings that cannot apply, wrapping
// console.ErrInvalidSettings: the message is shown to the user.
func (s *settingsStore) check(policy string, aliases []console.Alias) error {
	if !slices.Contains(s.policies, policy) {
		return fmt.Errorf("%w: unknown routing policy %q (known: %s)", console.ErrInvalidSettings, policy, strings.Join(s.policies, ", "))
	}
	seen := make(map[string]bool, len(aliases))
	for _, a := range aliases {
		if seen[a.From] {
			return fmt.Errorf("%w: alias %q is set twice", console.ErrInvalidSettings, a.From)
		}
		seen[a.From] = true
	}
	// The gateway's own rules: pattern syntax, targets that are served.
	if err := (api.Config{Models: s.models, Aliases: aliasMap(aliases)}).Validate(); err != nil {
		return fmt.Errorf("%w: %v", console.ErrInvalidSettings, err)
	}
	return nil
}

// Aliases are the aliases in force, in the gateway's form.
func (s *settingsStore) Aliases() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return aliasMap(s.aliases)
}

func (s *settingsStore) Settings(context.Context) (console.Settings, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return console.Settings{
		Policy: s.policy, Policies: slices.Clone(s.policies), Models: slices.Clone(s.models),
		Aliases: slices.Clone(s.aliases),
	}, nil
}

// SaveSettings checks st, applies its aliases to the gateway, saves it and
// then switches the policy. Should the database refuse, the gateway's
// aliases go back to what they were: what runs is what the next start
// will find.
func (s *settingsStore) SaveSettings(ctx context.Context, st console.Settings) error {
	// The strings may point into fasthttp's reused request buffers.
	policy := strings.Clone(st.Policy)
	aliases := make([]console.Alias, len(st.Aliases))
	for i, a := range st.Aliases {
		aliases[i] = console.Alias{From: strings.Clone(a.From), To: strings.Clone(a.To)}
	}
	if err := s.check(policy, aliases); err != nil {
		return err
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err := s.resolver.SetAliases(aliasMap(aliases)); err != nil {
		return fmt.Errorf("%w: %v", console.ErrInvalidSettings, err)
	}
	saved := store.Settings{Policy: policy, Aliases: make([]store.Alias, len(aliases))}
	for i, a := range aliases {
		saved.Aliases[i] = store.Alias{From: a.From, To: a.To}
	}
	if err := s.db.SaveSettings(ctx, saved); err != nil {
		if rerr := s.resolver.SetAliases(aliasMap(s.aliases)); rerr != nil {
			return errors.Join(err, fmt.Errorf("restoring the aliases: %w", rerr))
		}
		return err
	}
	s.mu.Lock()
	s.policy, s.aliases = policy, aliases
	s.mu.Unlock()
	return nil
}

// Policy is the routing policy for requests that do not name one.
func (s *settingsStore) Policy() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.policy
}
