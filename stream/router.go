package stream

import "context"

// Router sends each request to its provider's endpoint. It satisfies the
// retry package's Doer.
type Router struct {
	Client    *Client             // nil: a Client with the defaults
	Endpoints map[string]Endpoint // by Target.EndpointKey: the provider's name, or "provider@account"
	// Accounts resolves a named account's endpoint (a Target with an
	// Account) that Endpoints lacks; nil: only Endpoints.
	Accounts func(t Target) (Endpoint, error)
}

// endpoint is t's endpoint: from Endpoints, else (a named account) from
// Accounts.
func (r Router) endpoint(t Target) (Endpoint, bool, error) {
	if ep, ok := r.Endpoints[t.EndpointKey()]; ok {
		return ep, true, nil
	}
	if t.Account != "" && r.Accounts != nil {
		ep, err := r.Accounts(t)
		return ep, err == nil, err
	}
	return Endpoint{}, false, nil
}

// Do sends req to the endpoint of its target's provider. A provider with no
// endpoint is a caller error naming the key variable to set.
func (r Router) Do(ctx context.Context, req Request, onText func(string)) Result {
	ep, ok, err := r.endpoint(req.Target)
	if !ok {
		var msg string
		if err != nil {
			msg = err.Error()
		} else if p, known := lookupProvider(req.Target.Provider); known && req.Target.Account != "" {
			msg = (&MissingKeyError{Provider: req.Target.EndpointKey(), Vars: AccountKeyEnv(p.Name, req.Target.Account)}).Error()
		} else if known {
			msg = (&MissingKeyError{Provider: p.Name, Vars: p.KeyEnv}).Error()
		} else {
			msg = "unknown provider " + req.Target.Provider
		}
		return Result{Err: &Error{Class: ClassCaller, Message: msg}}
	}
	c := r.Client
	if c == nil {
		c = &Client{}
	}
	return c.Do(ctx, ep, req, onText)
}

// Scope returns the cooldown key of a quota stop: "account:<provider>:<key
// fingerprint>" for ScopeAccount (the provider whose account it is:
// "openai" for "openai:responses" too) (never the key itself),
// "target:<provider>/<model>" for ScopeTarget, "" otherwise. When the
// provider's endpoint last answered as a limitscope simulator (with
// SimInstanceHeader), the key is prefixed "sim:<instance>:": a simulated
// stop then binds every client of that running simulator and no other, and
// a restarted simulator never inherits old stops. The instance is learnt
// from the responses seen by r.Client (nil: none is learnt).
func (r Router) Scope(t Target, s Scope) string {
	ep, _, _ := r.endpoint(t)
	var key string
	switch s {
	case ScopeAccount:
		// An API variant's calls spend its provider's account.
		key = "account:" + providerRow(t.Provider).AccountName() + ":" + ep.Key.Fingerprint()
	case ScopeTarget:
		key = "target:" + t.String()
	default:
		return ""
	}
	if r.Client != nil {
		if id := r.Client.simInstance(ep.BaseURL); id != "" {
			key = "sim:" + id + ":" + key
		}
	}
	return key
}
