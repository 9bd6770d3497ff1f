package store

import (
	"errors"
	"path/filepath"
)

// Paths are the places limitscope keeps things, and where each came from.
type Paths struct {
	DB           string `json:"db"`
	DBSource     string `json:"db_source"` // "LIMITSCOPE_DB", "XDG_STATE_HOME" or "HOME"
	StateDir     string `json:"state_dir"`
	ConfigDir    string `json:"config_dir"`
	ConfigSource string `json:"config_source"` // "XDG_CONFIG_HOME" or "HOME"
}

// DefaultPath is the history file: $LIMITSCOPE_DB, else
// $XDG_STATE_HOME/limitscope/history.db, else
// ~/.local/state/limitscope/history.db. Nothing is created.
func DefaultPath(getenv func(string) string) (string, error) {
	p, err := ResolvePaths(getenv)
	return p.DB, err
}

// ResolvePaths finds every path from the environment (read through getenv).
// Relative XDG values are ignored, as the XDG spec says.
func ResolvePaths(getenv func(string) string) (Paths, error) {
	var p Paths
	home := getenv("HOME")
	state := getenv("XDG_STATE_HOME")
	switch {
	case state != "" && filepath.IsAbs(state):
		p.StateDir = filepath.Join(state, "limitscope")
	case home != "":
		p.StateDir = filepath.Join(home, ".local", "state", "limitscope")
	}
	cfg := getenv("XDG_CONFIG_HOME")
	switch {
	case cfg != "" && filepath.IsAbs(cfg):
		p.ConfigDir, p.ConfigSource = filepath.Join(cfg, "limitscope"), "XDG_CONFIG_HOME"
	case home != "":
		p.ConfigDir, p.ConfigSource = filepath.Join(home, ".config", "limitscope"), "HOME"
	}
	switch {
	case getenv("LIMITSCOPE_DB") != "":
		p.DB, p.DBSource = getenv("LIMITSCOPE_DB"), "LIMITSCOPE_DB"
		if abs, err := filepath.Abs(p.DB); err == nil {
			p.DB = abs
		}
	case p.StateDir != "":
		p.DB = filepath.Join(p.StateDir, "history.db")
		p.DBSource = "HOME"
		if state != "" && filepath.IsAbs(state) {
			p.DBSource = "XDG_STATE_HOME"
		}
	default:
		return p, errors.New("no place for the history file: HOME is not set; set LIMITSCOPE_DB or XDG_STATE_HOME")
	}
	return p, nil
}
