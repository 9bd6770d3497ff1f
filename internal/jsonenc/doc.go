// Package jsonenc appends JSON strings byte for byte as encoding/json
// writes them, without its reflection when nothing needs escaping: the
// request bodies the client sends and the simulator's answers use it.
package jsonenc
