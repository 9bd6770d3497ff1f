package sim

import (
	"net/http"
	"strings"

	"github.com/limitscope/limitscope/stream"
)

// AccountKey is the simulator's key for a provider's named account
// ("" = FakeKey, the default account): FakeKey, "-" and the account
// ("sim-key-not-a-secret-team"). Every provider takes each of them as
// another account: its own limits, spend and per-day counters, and faults
// armed for "provider@account" hit it alone. None is a secret.
func AccountKey(account string) string {
	if account == "" {
		return FakeKey
	}
	return FakeKey + "-" + account
}

// keyAccount is the account a key names: "" for FakeKey, the suffix for
// AccountKey's keys; false for any other key.
func keyAccount(k string) (string, bool) {
	if k == FakeKey {
		return "", true
	}
	acct, ok := strings.CutPrefix(k, FakeKey+"-")
	if !ok || !stream.ValidAccount(acct) {
		return "", false
	}
	return acct, true
}

// validKey reports whether k is one of the simulator's keys.
func validKey(k string) bool {
	_, ok := keyAccount(k)
	return ok
}

// requestAccount is the account of an authenticated request's key, in any
// of the documented forms (x-api-key, x-goog-api-key, ?key=, a bearer
// token).
func requestAccount(r *http.Request) string {
	b, _ := bearer(r)
	for _, k := range []string{r.Header.Get("x-api-key"), r.Header.Get("x-goog-api-key"), r.URL.Query().Get("key"), b} {
		if a, ok := keyAccount(k); ok && k != "" {
			return a
		}
	}
	return ""
}

// stateKey is the key of a request's limits and armed faults: the
// provider, or "provider@account".
func stateKey(provider, account string) string { return stream.EndpointKey(provider, account) }

// stateOf is the live state of provider's account, made afresh (full
// limits, nothing spent) on its first request. Called with s.mu held.
func (s *Server) stateOf(provider, account string) *provState {
	if account == "" {
		return s.state[provider]
	}
	key := stateKey(provider, account)
	if st, ok := s.accounts[key]; ok {
		return st
	}
	if s.accounts == nil {
		s.accounts = map[string]*provState{}
	}
	st := s.newState(provider, s.state[provider].cfg, s.seed)
	s.accounts[key] = st
	return st
}
