package calls

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// AccountsFile is the accounts file's path: $LIMITSCOPE_ACCOUNTS, else
// accounts.json in the config folder ($XDG_CONFIG_HOME/limitscope, else
// ~/.config/limitscope); "" when there is no config folder.
func AccountsFile(getenv func(string) string) string {
	if p := getenv("LIMITSCOPE_ACCOUNTS"); p != "" {
		return p
	}
	paths, _ := store.ResolvePaths(getenv)
	if paths.ConfigDir == "" {
		return ""
	}
	return filepath.Join(paths.ConfigDir, "accounts.json")
}

// envName is an environment variable's name, the only thing an accounts
// file may hold for a key.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// accountsDoc is the accounts file: each named account's key variable,
//
//	{"accounts": {"openai@team": "OPENAI_TEAM_KEY", "anthropic@personal": "MY_CLAUDE_KEY"}}
//
// never a key.
type accountsDoc struct {
	Accounts map[string]string `json:"accounts"`
}

// LoadAccounts reads the accounts file (AccountsFile; none is no
// accounts): each "provider@account" and the variable its key is read
// from. A value that is not a variable's name is refused without being
// repeated (it may be a key pasted by mistake).
func LoadAccounts(getenv func(string) string) (map[string]string, error) {
	path := AccountsFile(getenv)
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("accounts file: %w", err)
	}
	return parseAccounts(path, b)
}

func parseAccounts(path string, b []byte) (map[string]string, error) {
	var doc accountsDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		// json's syntax errors quote no input, but a type error names a
		// value's type only: neither repeats a key.
		return nil, fmt.Errorf("accounts file %s: %w", path, err)
	}
	out := make(map[string]string, len(doc.Accounts))
	for name, v := range doc.Accounts {
		prov, acct, ok := strings.Cut(strings.ToLower(name), stream.AccountSep)
		info, known := stream.Provider(prov)
		if !ok || !known || !stream.ValidAccount(acct) {
			// The name is not repeated either: it may be a pasted key.
			return nil, fmt.Errorf("accounts file %s: an entry's name is not provider@account with a known provider (e.g. openai@team)", path)
		}
		if !envName.MatchString(v) {
			return nil, fmt.Errorf("accounts file %s: %s: the value must name an environment variable (e.g. OPENAI_API_KEY_TEAM), never hold a key", path, stream.EndpointKey(prov, acct))
		}
		out[stream.EndpointKey(info.AccountName(), acct)] = v
	}
	return out, nil
}
