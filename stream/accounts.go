package stream

import "strings"

// AccountKeyEnv is the conventional key variable of a provider's named
// account: each of the provider's key variables with "_" and the account in
// upper case ('-' as '_'): OPENAI_API_KEY_TEAM for openai@team,
// GOOGLE_API_KEY_TEAM or GEMINI_API_KEY_TEAM for gemini@team. An API
// variant reads its provider's ("openai:responses@team": OPENAI_API_KEY_TEAM).
// account "" is the provider's own variables.
func AccountKeyEnv(provider, account string) []string {
	p, ok := lookupProvider(provider)
	if !ok {
		return nil
	}
	if account == "" {
		return append([]string(nil), p.KeyEnv...)
	}
	suffix := "_" + strings.ToUpper(strings.ReplaceAll(account, "-", "_"))
	out := make([]string, 0, len(p.KeyEnv))
	for _, v := range p.KeyEnv {
		out = append(out, v+suffix)
	}
	return out
}

// ResolveAccount finds the endpoint of a provider's named account: the
// provider's base URL and the key in the first of vars that is set (vars
// nil: AccountKeyEnv's convention). A missing key is a *MissingKeyError
// naming the target's provider@account and the variables.
func ResolveAccount(provider, account string, vars []string, getenv func(string) string) (Endpoint, error) {
	if account == "" {
		return Resolve(provider, getenv)
	}
	ep, err := Resolve(provider, func(v string) string {
		if p, ok := lookupProvider(provider); ok && v == p.BaseURLEnv {
			return getenv(v)
		}
		return "" // the default account's key is not this account's
	})
	if _, missing := err.(*MissingKeyError); err != nil && !missing {
		return Endpoint{}, err
	}
	if vars == nil {
		vars = AccountKeyEnv(provider, account)
	}
	for _, v := range vars {
		if k := getenv(v); k != "" {
			ep.Key = Secret(k)
			return ep, nil
		}
	}
	return ep, &MissingKeyError{Provider: EndpointKey(provider, account), Vars: vars}
}
