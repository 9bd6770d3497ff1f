package store

import (
	"strings"

	"github.com/limitscope/limitscope/stream"
)

// A target's account is stored in its provider string ("openai@team"):
// provider names never hold an "@", so records written before accounts
// existed read as they did.

// targetOf makes the target stored as provider (maybe "provider@account")
// and model.
func targetOf(provider, model string) stream.Target {
	p, acct, _ := strings.Cut(provider, stream.AccountSep)
	return stream.Target{Provider: p, Account: acct, Model: model}
}

// provModel reads a target stored as its provider string and model.
func (d *dec) provModel() stream.Target {
	p := d.str()
	m := d.str()
	return targetOf(p, m)
}
