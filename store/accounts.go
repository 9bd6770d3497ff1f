package store

import (
	"strings"

	"github.com/limitscope/limitscope/stream"
)

// A target's account is stored in its provider string ("openai@team"):
// provider names never hold an "@", so records written before accounts
// existed read as they did.

// targetOf makes the target stored as provider (maybe "provider@account")
// and model (maybe "model+tier": see storedModel).
func targetOf(provider, model string) stream.Target {
	p, acct, _ := strings.Cut(provider, stream.AccountSep)
	t := stream.Target{Provider: p, Account: acct, Model: model}
	if i := strings.LastIndex(model, stream.TierSep); i > 0 {
		if tier := model[i+len(stream.TierSep):]; stream.ValidTier(p, tier) == nil {
			t.Model, t.Tier = model[:i], tier
		}
	}
	return t
}

// A target's service tier is stored after its model ("gpt-5.4-mini+flex"),
// as the target is written: records written before tiers existed read as
// they did, and older readers see the tier in the model's name.

// storedModel is t's model as stored: with "+tier" when t asks for one.
func storedModel(t stream.Target) string {
	if t.Tier == "" {
		return t.Model
	}
	return t.Model + stream.TierSep + t.Tier
}

// provModel reads a target stored as its provider string and model.
func (d *dec) provModel() stream.Target {
	p := d.str()
	m := d.str()
	return targetOf(p, m)
}
