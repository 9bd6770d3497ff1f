//go:build tools

// Package deps pins the modules the packages are being built on while they are written.
package deps

import (
	_ "charm.land/bubbles/v2/key"
	_ "charm.land/bubbletea/v2"
	_ "charm.land/lipgloss/v2"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/tmaxmax/go-sse"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "golang.org/x/time/rate"
)
