package store

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// recentSessions is how many of the newest sessions a recorder's first
// commit checks for a dead process.
const recentSessions = 2000

// recentCalls is how many of the newest calls it looks through for their
// running calls.
const recentCalls = 20000

// closeInterrupted closes, inside tx, the sessions among the newest
// recentSessions that never ended and whose process is gone (see
// processGone), and their calls still "running" among the newest
// recentCalls: each becomes
// OutcomeInterrupted, ended at its last recorded attempt's end (or its
// start), with the attempts that were recorded. It returns how many calls
// it closed.
func closeInterrupted(tx *bolt.Tx, boot string) (int, error) {
	sessions, calls := bucket(tx, bSessions), bucket(tx, bCalls)
	if sessions == nil || calls == nil {
		return 0, nil
	}
	var dead []*Session
	var deadKeys [][]byte
	c := sessions.Cursor()
	n := 0
	for k, v := c.Last(); k != nil && n < recentSessions; k, v = c.Prev() {
		n++
		s, err := decodeSession(k, v)
		if err != nil || !s.Ended.IsZero() || !processGone(s, boot) {
			continue
		}
		dead = append(dead, s)
		deadKeys = append(deadKeys, slices.Clone(k))
	}
	if len(dead) == 0 {
		return 0, nil
	}
	byID := map[uint32]*Session{}
	for _, s := range dead {
		byID[s.ID] = s
	}
	type put struct{ k, v []byte }
	var puts []put
	cc := calls.Cursor()
	n = 0
	for k, v := cc.Last(); k != nil && n < recentCalls; k, v = cc.Prev() {
		n++
		call, err := decodeCall(k, v, true)
		if err != nil {
			continue
		}
		s := byID[call.Session]
		if s == nil {
			continue
		}
		end := call.Ended
		if call.Outcome == OutcomeRunning {
			if call, err = decodeCall(k, v, false); err != nil {
				continue
			}
			atts, err := readAttempts(tx, k, call.Started, call.Chain, call.Attempts)
			if err != nil {
				continue
			}
			end = call.Started
			call.Classes = nil
			for _, a := range atts {
				if e := a.StartedAt.Add(a.Duration); e.After(end) {
					end = e
				}
				call.Classes = append(call.Classes, a.Class)
			}
			call.Outcome, call.Ended, call.Attempts = OutcomeInterrupted, end, len(atts)
			puts = append(puts, put{slices.Clone(k), encodeCall(call)})
		}
		if end.After(s.Ended) {
			s.Ended = end // the session's last known moment
		}
	}
	for _, p := range puts {
		if err := calls.Put(p.k, p.v); err != nil {
			return 0, fmt.Errorf("close interrupted call: %w", err)
		}
	}
	for i, s := range dead {
		if s.Ended.IsZero() || s.Ended.Before(s.Started) {
			s.Ended = s.Started
		}
		if err := sessions.Put(deadKeys[i], encodeSession(s)); err != nil {
			return 0, fmt.Errorf("close interrupted session: %w", err)
		}
	}
	closed := len(puts)
	return closed, nil
}
