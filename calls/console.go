package calls

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// ConsoleTargets lists one target per provider, its default model
// (stream.ProviderInfo.DefaultModel), available when the session can reach
// it, or naming the key variable it lacks.
func (p *Providers) ConsoleTargets() []tui.TargetInfo {
	var out []tui.TargetInfo
	for _, info := range stream.Providers() {
		if info.DefaultModel == "" {
			continue
		}
		ti := tui.TargetInfo{Target: stream.Target{Provider: info.Name, Model: info.DefaultModel}}
		if info.SigV4Service != "" {
			// An AWS API's target names its Region (AWS_REGION's by default).
			ti.Target.Model = stream.WithRegion(info.DefaultModel, p.Endpoints[info.Name].Region)
		}
		if _, ok := p.Endpoints[info.Name]; ok {
			ti.Available = true
		} else if mk, ok := p.Missing[info.Name]; ok && len(mk.Vars) > 0 {
			ti.Missing = mk.Vars[0]
		}
		out = append(out, ti)
	}
	return out
}

// MergeTargets puts the chain first, then the defaults not already in it.
func MergeTargets(chain []stream.Target, defaults []tui.TargetInfo) []tui.TargetInfo {
	out := make([]tui.TargetInfo, 0, len(chain)+len(defaults))
	seen := map[stream.Target]bool{}
	for _, t := range chain {
		seen[t] = true
		out = append(out, tui.TargetInfo{Target: t, Available: true})
	}
	for _, d := range defaults {
		if !seen[d.Target] {
			out = append(out, d)
		}
	}
	return out
}

// DefaultChain is the console's chain when --model names none: the first
// three available targets.
func DefaultChain(targets []tui.TargetInfo) []stream.Target {
	var chain []stream.Target
	for _, t := range targets {
		if t.Available && len(chain) < 3 {
			chain = append(chain, t.Target)
		}
	}
	return chain
}

// Faults injects the console's demo faults into the embedded simulator;
// nil when the session is real.
func (p *Providers) Faults() tui.Faults {
	if p.Sim == nil {
		return nil
	}
	return simFaults{srv: p.Sim.Server}
}

// ArmedFaults lists and clears the embedded simulator's armed faults, and
// with them the simulated stops they caused in cool (the session's
// cooldowns, in memory for a simulated session); nil when the session is
// real.
func (p *Providers) ArmedFaults(cool retry.Cooldowns) tui.ArmedFaults {
	if p.Sim == nil {
		return nil
	}
	return simFaults{srv: p.Sim.Server, cool: cool}
}

// simFaults is tui.Faults and tui.ArmedFaults on the embedded simulator.
type simFaults struct {
	srv  *sim.Server
	cool retry.Cooldowns
}

func (s simFaults) Inject(_ context.Context, f tui.FaultRequest) error {
	return s.srv.Inject(sim.Fault{Provider: f.Provider, Kind: f.Kind, RetryAfter: f.RetryAfter, Count: f.Count, Code: f.Code, For: f.For})
}

func (s simFaults) Armed(context.Context) ([]tui.ArmedFault, error) {
	var out []tui.ArmedFault
	for _, a := range s.srv.Armed() {
		f := tui.ArmedFault{Provider: a.Provider, Kind: a.Kind}
		if a.Left > 0 {
			f.Left = a.Left
		}
		if a.Until != nil {
			f.Until = *a.Until
		}
		out = append(out, f)
	}
	return out, nil
}

// ClearFaults disarms provider's faults ("" every provider's) and clears
// the simulated stops recorded on its targets.
func (s simFaults) ClearFaults(_ context.Context, provider string) error {
	s.srv.ClearFaults(provider)
	if s.cool == nil {
		return nil
	}
	cds, err := s.cool.List()
	if err != nil {
		return fmt.Errorf("listing simulated stops: %w", err)
	}
	for _, c := range cds {
		tp, _, _ := strings.Cut(c.Target, "/")
		if provider == "" || account(tp) == account(provider) {
			if err := s.cool.Clear(c.Scope); err != nil {
				return fmt.Errorf("clearing simulated stop %s: %w", c.Scope, err)
			}
		}
	}
	return nil
}

// account is the provider whose simulated account a provider name uses (an
// API variant's, such as openai:responses, is its provider's: the same
// simulated faults and stops).
func account(provider string) string {
	if info, ok := stream.Provider(provider); ok {
		return info.AccountName()
	}
	return provider
}

func (s simFaults) SetScenario(_ context.Context, name string) error { return s.srv.SetScenario(name) }

// ConsoleHistory serves the console's history view from the file the
// recorder writes; nil when nothing is recorded.
func (h *History) ConsoleHistory() tui.History {
	if h.rec == nil {
		return nil
	}
	return storeHistory{rd: &store.Reader{Path: h.rec.Path()}}
}

// storeHistory is tui.History on the history file.
type storeHistory struct{ rd *store.Reader }

func summary(c *store.Call) tui.CallSummary {
	s := tui.CallSummary{
		ID:       strconv.FormatUint(uint64(c.ID), 10),
		Time:     c.Started,
		Outcome:  c.Outcome,
		Attempts: c.Attempts,
	}
	if c.ServedBy != nil {
		s.ServedBy = c.ServedBy.String()
	}
	if len(c.Chain) > 0 {
		s.Target = c.Chain[0].String()
	}
	if c.Session != 0 {
		s.Session = strconv.FormatUint(uint64(c.Session), 10) // the history's timeline groups a session's calls
	}
	s.Duration = c.Latency()
	head := c.Prompt
	if head == "" && len(c.Chain) > 0 {
		head = c.Chain[0].String()
	}
	s.PromptHead = strings.ReplaceAll(head, "\n", " ")
	return s
}

func (h storeHistory) List(ctx context.Context, f tui.HistoryFilter) ([]tui.CallSummary, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 200
	}
	calls, err := h.rd.List(ctx, store.Filter{Limit: limit, Text: f.Text, PromptHead: 80})
	if err != nil {
		return nil, err
	}
	out := make([]tui.CallSummary, 0, len(calls))
	for i := range calls {
		out = append(out, summary(&calls[i]))
	}
	return out, nil
}

func (h storeHistory) Show(ctx context.Context, id string) (tui.CallDetail, error) {
	c, err := h.rd.Show(ctx, id)
	if err != nil {
		return tui.CallDetail{}, err
	}
	return tui.CallDetail{CallSummary: summary(c), Prompt: c.Prompt, Attempts: c.AttemptsList,
		Waits: store.WaitsOf(c.AttemptsList), Text: c.Text}, nil
}
