package retry

import (
	"sort"
	"sync"
)

// MemoryCooldowns keeps cooldowns in memory, for one process's life. It is
// safe for concurrent use.
type MemoryCooldowns struct {
	mu sync.Mutex
	m  map[string]Cooldown
}

// NewMemoryCooldowns returns an empty in-memory Cooldowns.
func NewMemoryCooldowns() *MemoryCooldowns {
	return &MemoryCooldowns{m: make(map[string]Cooldown)}
}

var _ Cooldowns = (*MemoryCooldowns)(nil)

// Get returns the cooldown of scope, if one was set (active or not).
func (m *MemoryCooldowns) Get(scope string) (Cooldown, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.m[scope]
	return c, ok, nil
}

// Set stores c under c.Scope, replacing any earlier one.
func (m *MemoryCooldowns) Set(c Cooldown) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]Cooldown)
	}
	m.m[c.Scope] = c
	return nil
}

// Clear removes the cooldown of scope; clearing a missing one is no error.
func (m *MemoryCooldowns) Clear(scope string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, scope)
	return nil
}

// List returns every stored cooldown, sorted by scope.
func (m *MemoryCooldowns) List() ([]Cooldown, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Cooldown, 0, len(m.m))
	for _, c := range m.m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out, nil
}
