package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the proxy token's file in the config folder.
const TokenFile = "proxy-token"

// tokenPrefix marks a limitscope proxy token, so one found in a log or an
// app's settings is recognisable.
const tokenPrefix = "lsp-"

// TokenPath is where the proxy's token lives in configDir (see
// store.ResolvePaths(getenv).ConfigDir).
func TokenPath(configDir string) string { return filepath.Join(configDir, TokenFile) }

// LoadOrCreateToken returns the token stored at path, creating it (and its
// folder, 0700) on first use: 32 random bytes in hex, written 0600. A file
// readable by others is tightened to 0600. The token is a credential: never
// print it except where the user asked to see it (limitscope info).
func LoadOrCreateToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("proxy token: no config folder (set HOME or XDG_CONFIG_HOME)")
	}
	if tok, err := readToken(path); err == nil {
		return tok, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("proxy token: creating %s: %w", filepath.Dir(path), err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("proxy token: %w", err)
	}
	tok := tokenPrefix + hex.EncodeToString(b[:])
	// Write a private temporary file, then link it into place: the token
	// appears whole or not at all, and a process that loses the race to
	// create it reads the winner's.
	f, err := os.CreateTemp(filepath.Dir(path), ".proxy-token-*")
	if err != nil {
		return "", fmt.Errorf("proxy token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", fmt.Errorf("proxy token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("proxy token: writing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("proxy token: writing %s: %w", tmp, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readToken(path)
		}
		return "", fmt.Errorf("proxy token: %w", err)
	}
	return tok, nil
}

func readToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("proxy token: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("proxy token: %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("proxy token: %s is readable by others and cannot be made private: %w", path, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("proxy token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("proxy token: %s does not hold a token (delete it to make a new one)", path)
	}
	return tok, nil
}
