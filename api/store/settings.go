package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// Settings are what the user saved in the console. The store keeps them
// as given; what a valid policy or alias is, is for the caller to decide.
type Settings struct {
	Policy  string  // routing policy of requests that name none
	Aliases []Alias // in the order the user wrote them
}

// Alias maps a client's model name or pattern to a served model.
type Alias struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Names of the rows in the settings table.
const (
	settingPolicy  = "policy"
	settingAliases = "aliases"
)

// Settings returns the saved settings; saved is false when the user never
// saved any, and the caller keeps its own defaults.
func (s *SQLite) Settings(ctx context.Context) (st Settings, saved bool, err error) {
	// One statement reads both rows from one snapshot.
	rows, err := s.db.QueryContext(ctx, `SELECT name, value FROM settings WHERE name IN (?, ?)`, settingPolicy, settingAliases)
	if err != nil {
		return Settings{}, false, fmt.Errorf("store: read settings: %w", err)
	}
	defer rows.Close()
	values := make(map[string]string, 2)
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return Settings{}, false, fmt.Errorf("store: read settings: %w", err)
		}
		values[name] = value
	}
	if err := rows.Err(); err != nil {
		return Settings{}, false, fmt.Errorf("store: read settings: %w", err)
	}
	policy, hasPolicy := values[settingPolicy]
	aliases, hasAliases := values[settingAliases]
	if !hasPolicy || !hasAliases { // SaveSettings writes both or neither
		return Settings{}, false, nil
	}
	if err := json.Unmarshal([]byte(policy), &st.Policy); err != nil {
		return Settings{}, false, fmt.Errorf("store: read settings: policy: %w", err)
	}
	if err := json.Unmarshal([]byte(aliases), &st.Aliases); err != nil {
		return Settings{}, false, fmt.Errorf("store: read settings: aliases: %w", err)
	}
	return st, true, nil
}

// SaveSettings replaces the saved settings, all of them or none.
func (s *SQLite) SaveSettings(ctx context.Context, st Settings) error {
	if st.Aliases == nil {
		st.Aliases = []Alias{} // saved as "no aliases", not as null
	}
	policy, err := json.Marshal(st.Policy)
	if err != nil {
		return fmt.Errorf("store: save settings: %w", err)
	}
	aliases, err := json.Marshal(st.Aliases)
	if err != nil {
		return fmt.Errorf("store: save settings: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: save settings: %w", err)
	}
	defer tx.Rollback()
	for _, row := range []struct{ name, value string }{
		{settingPolicy, string(policy)},
		{settingAliases, string(aliases)},
	} {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)`, row.name, row.value); err != nil {
			return fmt.Errorf("store: save settings: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: save settings: %w", err)
	}
	return nil
}
