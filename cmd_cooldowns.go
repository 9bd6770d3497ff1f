package main

import (
	"context"
	"fmt"
	"time"

	"github.com/limitscope/limitscope/store"
)

// runCooldowns is `limitscope cooldowns [--json]` and
// `limitscope cooldowns clear [SCOPE|--all]`.
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
	fs := newReviewFlagSet(name)
	hf.register(fs, false, 0)
	pos, ok, code := parseArgs(a, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 1 || (!clearing && len(pos) > 0) {
		return usageErr(a, name, fmt.Errorf("unexpected argument %q (usage: limitscope cooldowns [clear [SCOPE]])", pos[len(pos)-1]))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	cd := store.NewCooldowns(path, store.Options{})
	list, err := cd.List()
	if err != nil {
		return histFail(a, err)
	}
	now := a.now()
	if clearing {
		var cleared []string
		if len(pos) == 0 {
			if len(list) > 0 {
				if _, err := cd.ClearAll(); err != nil {
					return histFail(a, err)
				}
			}
			for _, c := range list {
				cleared = append(cleared, c.Scope)
			}
		} else {
			found := false
			for _, c := range list {
				found = found || c.Scope == pos[0]
			}
			if !found {
				fmt.Fprintf(a.stderr, "limitscope: no cooldown %q (see limitscope cooldowns)\n", pos[0])
				return exitFailed
			}
			if err := cd.Clear(pos[0]); err != nil {
				return histFail(a, err)
			}
			cleared = []string{pos[0]}
		}
		if hf.asJSON {
			if cleared == nil {
				cleared = []string{}
			}
			return writeJSON(a, map[string]any{"db": path, "cleared": cleared})
		}
		if len(cleared) == 0 {
			fmt.Fprintln(a.stdout, "no cooldowns to clear")
		}
		for _, s := range cleared {
			fmt.Fprintf(a.stdout, "cleared %s\n", s)
		}
		return exitOK
	}
	if hf.asJSON {
		type cdJSON struct {
			Scope   string  `json:"scope"`
			Active  bool    `json:"active"`
			Until   *string `json:"until"` // null: until cleared
			Since   string  `json:"since"`
			Target  string  `json:"target"`
			Code    string  `json:"code"`
			Message string  `json:"message"`
		}
		doc := struct {
			DB        string   `json:"db"`
			Cooldowns []cdJSON `json:"cooldowns"`
		}{DB: path, Cooldowns: []cdJSON{}}
		for _, c := range list {
			j := cdJSON{Scope: c.Scope, Active: c.Active(now), Since: c.Since.UTC().Format(time.RFC3339Nano), Target: c.Target, Code: c.Code, Message: c.Message}
			if !c.Until.IsZero() {
				u := c.Until.UTC().Format(time.RFC3339Nano)
				j.Until = &u
			}
			doc.Cooldowns = append(doc.Cooldowns, j)
		}
		return writeJSON(a, doc)
	}
	o := newTextOut(a)
	if len(list) == 0 {
		if o.tty {
			fmt.Fprintln(a.stdout, "no cooldowns")
		}
		return exitOK
	}
	var rows [][]cell
	for _, c := range list {
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
		rows = append(rows, []cell{{c.Scope, o.id}, {state, color}, {until, nil}, {c.Target, nil}, {c.Code, nil}, {o.when(c.Since), o.dim}, {c.Message, o.dim}})
	}
	o.table([]string{"SCOPE", "STATE", "UNTIL", "TARGET", "CODE", "SINCE", "MESSAGE"}, rows)
	return exitOK
}
