package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/store"
)

// infoState is the state backend `info` reports: the history file alone,
// or the fleet's shared state in Redis over it.
type infoState struct {
	Backend   string `json:"backend"`          // "local" or "redis"
	URL       string `json:"url,omitempty"`    // redacted (fleet.Redact)
	Source    string `json:"source,omitempty"` // --state or LIMITSCOPE_REDIS_URL
	Reachable *bool  `json:"reachable,omitempty"`
}

// runInfo is `limitscope info`: the paths in use, like `k9s info`, and the
// state backend (with --state or LIMITSCOPE_REDIS_URL, whether its Redis
// answers).
func runInfo(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("info", reviewSpec{})
	stateFlag := registerState(fs)
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	url, source, err := reviewState(a, *stateFlag)
	if err != nil {
		return usageErr(a, "info", err)
	}
	st, err := stateInfo(ctx, a, url, source)
	if err != nil {
		return usageErr(a, "info", err)
	}
	p, perr := store.ResolvePaths(a.getenv)
	if hf.db != "" {
		p.DB, p.DBSource, perr = hf.db, "--db", nil
	}
	if perr != nil {
		return histFail(a, perr)
	}
	doc := infoDoc{Version: a.buildVersion(), Paths: p, Schema: store.SchemaVersion, State: st}
	// The proxy's token is made on first use; this is where a user reads it
	// to give their application (it is never logged).
	if p.ConfigDir != "" {
		tok, path, err := calls.ProxyToken(a.getenv)
		if err != nil {
			fmt.Fprintf(a.stderr, "limitscope info: %v\n", err)
		}
		doc.ProxyToken, doc.ProxyTokenFile = tok, path
	}
	if fi, err := os.Stat(p.DB); err == nil {
		doc.DBExists, doc.DBBytes = true, fi.Size()
	}
	if hf.asJSON {
		return writeJSON(a, doc)
	}
	printInfo(a, &doc)
	return exitOK
}

// infoDoc is what info says: the paths in use, the history file, the proxy's
// token and the state backend.
type infoDoc struct {
	Version string `json:"version"`
	store.Paths
	DBExists       bool      `json:"db_exists"`
	DBBytes        int64     `json:"db_bytes"`
	Schema         int       `json:"schema"`
	ProxyTokenFile string    `json:"proxy_token_file,omitempty"`
	ProxyToken     string    `json:"proxy_token,omitempty"`
	State          infoState `json:"state"`
}

// stateInfo is the state backend: local, or the Redis at url (from
// source) and whether it answers.
func stateInfo(ctx context.Context, a *app, url, source string) (infoState, error) {
	if url == "" {
		return infoState{Backend: "local"}, nil
	}
	st := infoState{Backend: "redis", URL: fleet.Redact(url), Source: source}
	f, err := fleet.Open(ctx, url, fleet.Options{Getenv: a.getenv, Command: "info"})
	if err != nil {
		return st, err
	}
	up := f.Up()
	st.Reachable = &up
	_ = f.Close()
	return st, nil
}

// printInfo prints doc in three columns: what, where, and a note (where a
// path came from, whether the Redis answers); aligned on a terminal,
// tab-separated when piped.
func printInfo(a *app, doc *infoDoc) {
	o := newTextOut(a)
	p, st := doc.Paths, doc.State
	dbNote := paren(p.DBSource)
	if doc.DBExists {
		dbNote += ", " + byteSize(doc.DBBytes)
	} else {
		dbNote += ", not created yet"
	}
	rows := [][]cell{
		{{"version", o.bold}, {doc.Version, nil}, {"", nil}},
		{{"history", o.bold}, {p.DB, o.id}, {dbNote, o.dim}},
		{{"state dir", o.bold}, {p.StateDir, nil}, {"", nil}},
		{{"config dir", o.bold}, {p.ConfigDir, nil}, {paren(p.ConfigSource), o.dim}},
	}
	if st.Backend == "redis" {
		note := "(" + st.Source + ", shared with every process on it; "
		if *st.Reachable {
			note += "reachable)"
		} else {
			note += "unreachable: each process falls back to its own)"
		}
		rows = append(rows, []cell{{"state", o.bold}, {st.URL, o.id}, {note, o.dim}})
	} else {
		rows = append(rows, []cell{{"state", o.bold}, {"local", nil}, {"(this process's own, the history file's cooldowns; --state or LIMITSCOPE_REDIS_URL shares it)", o.dim}})
	}
	if doc.ProxyToken != "" {
		rows = append(rows, []cell{{"proxy token", o.bold}, {doc.ProxyToken, nil}, {"(" + doc.ProxyTokenFile + ", 0600)", o.dim}})
	}
	if o.tty {
		for _, r := range rows {
			line := fmt.Sprintf("%s %s  %s", o.paint(r[0].style, fmt.Sprintf("%-11s", r[0].text)), o.paint(r[1].style, r[1].text), o.paint(r[2].style, r[2].text))
			fmt.Fprintln(a.stdout, strings.TrimRight(line, " "))
		}
		return
	}
	// Piped, the same three columns: what the terminal says, the note
	// included (whether the Redis answers, where a path came from).
	for _, r := range rows {
		fmt.Fprintf(a.stdout, "%s\t%s\t%s\n", r[0].text, r[1].text, r[2].text)
	}
}
