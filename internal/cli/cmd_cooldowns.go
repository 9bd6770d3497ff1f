package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
)

// sharedCooldowns opens the shared state at url for a review command, with
// its cooldowns: Redis's alone (the history file's are read and cleared
// apart, and none of them is pushed to Redis). Fleet.Up says whether Redis
// answered. Close the Fleet.
func sharedCooldowns(ctx context.Context, a *app, url, cmd string) (*fleet.Fleet, *fleet.Cooldowns, error) {
	f, err := fleet.Open(ctx, url, fleet.Options{Getenv: a.getenv, Command: cmd})
	if err != nil {
		return nil, nil, err
	}
	return f, fleet.NewCooldowns(f, retry.NewMemoryCooldowns()), nil
}

// cooldownRow is one cooldown as `cooldowns` lists it: in this machine's
// history file (local), in the fleet's shared state (shared), or both.
type cooldownRow struct {
	retry.Cooldown
	local, shared bool
}

// where says where a cooldown is kept.
func (r cooldownRow) where() string {
	switch {
	case r.local && r.shared:
		return "local+shared"
	case r.shared:
		return "shared"
	}
	return "local"
}

// mergeCooldowns lists local's and shared's cooldowns by scope; a scope in
// both shows the shared one (its time left is Redis's).
func mergeCooldowns(local, shared []retry.Cooldown) []cooldownRow {
	by := map[string]*cooldownRow{}
	for _, c := range local {
		by[c.Scope] = &cooldownRow{Cooldown: c, local: true}
	}
	for _, c := range shared {
		if r := by[c.Scope]; r != nil {
			r.Cooldown, r.shared = c, true
		} else {
			by[c.Scope] = &cooldownRow{Cooldown: c, shared: true}
		}
	}
	out := make([]cooldownRow, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

// runCooldowns is `limitscope cooldowns [--json]` and
// `limitscope cooldowns clear [SCOPE|--all]`. With --state (or
// LIMITSCOPE_REDIS_URL) the fleet's shared stops are listed too, and
// cleared for every process.
func runCooldowns(ctx context.Context, a *app, args []string) int {
	clearing := len(args) > 0 && args[0] == "clear"
	if clearing {
		args = args[1:]
	}
	name := "cooldowns"
	if clearing {
		name = "cooldowns clear"
	}
	var hf historyFlags
	fs := hf.flagSet(name, reviewSpec{})
	stateFlag := registerState(fs)
	pos, ok, code := parseArgs(a, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 1 || (!clearing && len(pos) > 0) {
		return usageErr(a, name, fmt.Errorf("unexpected argument %q (usage: limitscope cooldowns [clear [SCOPE]])", pos[len(pos)-1]))
	}
	url, _, err := reviewState(a, *stateFlag)
	if err != nil {
		return usageErr(a, name, err)
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	v := &cooldownsView{path: path, url: url, local: store.NewCooldowns(path, store.Options{})}
	list, err := v.local.List()
	if err != nil {
		return histFail(a, err)
	}
	var sharedList []retry.Cooldown
	if url != "" {
		if sharedList, err = v.openShared(ctx, a, name, clearing); err != nil {
			return usageErr(a, name, err)
		}
		defer func() { _ = v.fl.Close() }()
	}
	v.rows = mergeCooldowns(list, sharedList)
	switch {
	case clearing:
		return v.clear(a, pos, hf.asJSON)
	case hf.asJSON:
		return v.writeJSON(a)
	}
	return v.print(a)
}

// cooldownsView is what the cooldowns command reads: this machine's
// cooldowns and, with shared state, the fleet's.
type cooldownsView struct {
	path   string
	local  *store.Cooldowns
	url    string           // the shared state's address; "": none
	fl     *fleet.Fleet     // set by openShared
	shared *fleet.Cooldowns // nil: no shared state, or Redis away
	where  string           // the shared state, redacted
	rows   []cooldownRow
}

// openShared connects to the shared state at v.url and lists its
// cooldowns; when it is unreachable, it says so on stderr and lists none.
func (v *cooldownsView) openShared(ctx context.Context, a *app, name string, clearing bool) ([]retry.Cooldown, error) {
	fl, sc, err := sharedCooldowns(ctx, a, v.url, name)
	if err != nil {
		return nil, err
	}
	v.fl, v.where = fl, fl.Where()
	var list []retry.Cooldown
	if fl.Up() {
		v.shared = sc
		if list, err = sc.List(); err != nil || !fl.Up() {
			v.shared, list = nil, nil
		}
	}
	if v.shared == nil {
		what := "these are this machine's cooldowns only"
		if clearing {
			what = "nothing was cleared for the fleet, only on this machine"
		}
		fmt.Fprintf(a.stderr, "limitscope: the shared state at %s is unreachable: %s\n", v.where, what)
	}
	return list, nil
}

// clear ends the cooldown pos names (every one without pos), here and in
// the shared state, and says which it cleared.
func (v *cooldownsView) clear(a *app, pos []string, asJSON bool) int {
	var cleared []string
	failed := false
	for _, r := range v.rows {
		if len(pos) == 1 && r.Scope != pos[0] {
			continue
		}
		if r.local {
			if err := v.local.Clear(r.Scope); err != nil {
				return histFail(a, err)
			}
		}
		if r.shared {
			if err := v.shared.Clear(r.Scope); err != nil || !v.fl.Up() {
				fmt.Fprintf(a.stderr, "limitscope: %s was not cleared in the shared state at %s: Redis did not answer\n", r.Scope, v.where)
				failed = true
				continue
			}
		}
		cleared = append(cleared, r.Scope)
	}
	if len(pos) == 1 && len(cleared) == 0 && !failed {
		fmt.Fprintf(a.stderr, "limitscope: no cooldown %q (see limitscope cooldowns)\n", pos[0])
		return exitFailed
	}
	if asJSON {
		if cleared == nil {
			cleared = []string{}
		}
		doc := map[string]any{"db": v.path, "cleared": cleared}
		if v.where != "" {
			doc["state"] = v.where
		}
		if code := writeJSON(a, doc); code != exitOK {
			return code
		}
	} else {
		if len(cleared) == 0 && !failed {
			fmt.Fprintln(a.stdout, "no cooldowns to clear")
		}
		for _, s := range cleared {
			fmt.Fprintf(a.stdout, "cleared %s\n", s)
		}
	}
	if failed || (v.url != "" && v.shared == nil) {
		return exitFailed // the fleet still holds what was asked cleared
	}
	return exitOK
}

// writeJSON writes the cooldowns as one JSON document.
func (v *cooldownsView) writeJSON(a *app) int {
	now := a.now()
	type cdJSON struct {
		Scope   string  `json:"scope"`
		Active  bool    `json:"active"`
		Until   *string `json:"until"` // null: until cleared
		Since   string  `json:"since"`
		Target  string  `json:"target"`
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Local   bool    `json:"local"`  // in this machine's history file
		Shared  bool    `json:"shared"` // in the fleet's shared state
	}
	doc := struct {
		DB        string   `json:"db"`
		State     string   `json:"state,omitempty"` // the shared state, redacted
		Cooldowns []cdJSON `json:"cooldowns"`
	}{DB: v.path, State: v.where, Cooldowns: []cdJSON{}}
	for _, c := range v.rows {
		j := cdJSON{Scope: c.Scope, Active: c.Active(now), Since: c.Since.UTC().Format(time.RFC3339Nano), Target: c.Target, Code: c.Code, Message: c.Message,
			Local: c.local, Shared: c.shared}
		if !c.Until.IsZero() {
			u := c.Until.UTC().Format(time.RFC3339Nano)
			j.Until = &u
		}
		doc.Cooldowns = append(doc.Cooldowns, j)
	}
	return writeJSON(a, doc)
}

// print writes the cooldowns as a table, with a WHERE column when shared
// state is in use.
func (v *cooldownsView) print(a *app) int {
	now := a.now()
	o := newTextOut(a)
	if len(v.rows) == 0 {
		fmt.Fprintln(a.stdout, "no cooldowns") // piped too: nothing printed would say nothing
		return exitOK
	}
	header := []string{"SCOPE", "STATE", "UNTIL", "TARGET", "CODE", "SINCE", "MESSAGE"}
	if v.url != "" {
		header = append(header[:2:2], append([]string{"WHERE"}, header[2:]...)...)
	}
	var cells [][]cell
	for _, c := range v.rows {
		state, color := "active", o.bad
		if !c.Active(now) {
			state, color = "ended", o.dim
		}
		until := "until cleared"
		if !c.Until.IsZero() {
			until = o.when(c.Until)
			if o.tty && c.Active(now) {
				until += " (in " + roundDur(c.Until.Sub(now)).String() + ")"
			}
		}
		row := []cell{{c.Scope, o.id}, {state, color}, {until, nil}, {c.Target, nil}, {c.Code, nil}, {o.when(c.Since), o.dim}, {c.Message, o.dim}}
		if v.url != "" {
			row = append(row[:2:2], append([]cell{{c.where(), nil}}, row[2:]...)...)
		}
		cells = append(cells, row)
	}
	o.table(header, cells)
	return exitOK
}
