package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Schema 1 (the first prototype) stored each record as a version byte 1 and
// a JSON document: calls carried their prompt and answer inline, there was
// no id index and no text bucket, and calls had no totals. Readers decode it
// as it is; the first write migrates the file to schema 2.

type sessionV1 struct {
	Ended   time.Time `json:"ended_at"`
	Version string    `json:"version"`
	Mode    string    `json:"mode"`
}

type callV1 struct {
	CallID       string          `json:"call_id"`
	Session      uint32          `json:"session"`
	Ended        time.Time       `json:"ended_at"`
	Outcome      string          `json:"outcome"`
	Chain        []stream.Target `json:"chain"`
	ServedBy     *stream.Target  `json:"served_by"`
	FinishReason string          `json:"finish_reason"`
	Usage        *stream.Usage   `json:"usage"`
	Error        *CallError      `json:"error"`
	Prompt       string          `json:"prompt"`
	Text         string          `json:"text"`
	Attempts     int             `json:"attempts"`
}

type attemptV1 struct {
	N           int            `json:"n"`
	Provider    string         `json:"provider"`
	Model       string         `json:"model"`
	Status      int            `json:"status"`
	Class       string         `json:"class"`
	Code        string         `json:"code"`
	Message     string         `json:"message"`
	RetryAfterM *int64         `json:"retry_after_ms"`
	DelaySource string         `json:"delay_source"`
	WaitedMs    int64          `json:"waited_ms"`
	RequestID   string         `json:"request_id"`
	MidStream   bool           `json:"mid_stream"`
	PartialText string         `json:"partial_text"`
	TTFTMs      int64          `json:"ttft_ms"`
	StartedAt   time.Time      `json:"started_at"`
	DurationMs  int64          `json:"duration_ms"`
	Decision    string         `json:"decision"`
	Limits      *stream.Limits `json:"limits"`
}

func decodeSessionV1(key, v []byte) (*Session, error) {
	var s sessionV1
	if err := json.Unmarshal(v[1:], &s); err != nil {
		return nil, fmt.Errorf("session %x (schema 1): %w", key, err)
	}
	return &Session{ID: keySeq(key), Started: keyTime(key), Ended: s.Ended, Version: s.Version, Mode: s.Mode}, nil
}

func decodeCallV1Full(key, v []byte) (*Call, *callV1, error) {
	var j callV1
	if err := json.Unmarshal(v[1:], &j); err != nil {
		return nil, nil, fmt.Errorf("call %x (schema 1): %w", key, err)
	}
	c := &Call{
		ID: keySeq(key), CallID: j.CallID, Session: j.Session, Started: keyTime(key),
		Ended: j.Ended, Outcome: retry.Outcome(j.Outcome), Chain: j.Chain, ServedBy: j.ServedBy,
		FinishReason: j.FinishReason, Usage: j.Usage, Err: j.Error, Attempts: j.Attempts,
		HasPrompt: j.Prompt != "", HasText: j.Text != "", Full: true,
	}
	if c.Outcome == "" {
		c.Outcome = OutcomeRunning
	}
	return c, &j, nil
}

func decodeCallV1(key, v []byte) (*Call, error) {
	c, _, err := decodeCallV1Full(key, v)
	return c, err
}

func attemptFromV1(j *attemptV1) retry.Attempt {
	a := retry.Attempt{
		N: j.N, Target: stream.Target{Provider: j.Provider, Model: j.Model}, Status: j.Status,
		Class: stream.Class(j.Class), Code: j.Code, Message: j.Message,
		DelaySource: stream.DelaySource(j.DelaySource), Waited: time.Duration(j.WaitedMs) * time.Millisecond,
		RequestID: j.RequestID, MidStream: j.MidStream, PartialText: j.PartialText,
		TTFT: time.Duration(j.TTFTMs) * time.Millisecond, StartedAt: j.StartedAt,
		Duration: time.Duration(j.DurationMs) * time.Millisecond, Limits: j.Limits,
		Decision: retry.Decision(j.Decision),
	}
	if j.RetryAfterM != nil {
		d := time.Duration(*j.RetryAfterM) * time.Millisecond
		a.RetryAfter = &d
	}
	return a
}

func decodeAttemptV1(v []byte) (retry.Attempt, error) {
	var j attemptV1
	if err := json.Unmarshal(v[1:], &j); err != nil {
		return retry.Attempt{}, fmt.Errorf("attempt (schema 1): %w", err)
	}
	return attemptFromV1(&j), nil
}

// migrate rewrites an older file to the current schema inside tx. It is
// idempotent: records already in the current format are left alone.
func migrate(tx *bolt.Tx, from int) error {
	if from != 1 {
		return fmt.Errorf("unknown schema %d", from)
	}
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	sessions, calls, attempts := tx.Bucket(bSessions), tx.Bucket(bCalls), tx.Bucket(bAttempts)
	ids, text := tx.Bucket(bIDs), tx.Bucket(bText)

	type kv struct{ k, v []byte }
	var puts []kv
	err := sessions.ForEach(func(k, v []byte) error {
		if len(v) == 0 || v[0] != 1 {
			return nil
		}
		s, err := decodeSessionV1(k, v)
		if err != nil {
			return err
		}
		puts = append(puts, kv{append([]byte(nil), k...), encodeSession(s)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range puts {
		if err := sessions.Put(p.k, p.v); err != nil {
			return err
		}
	}

	var callPuts, attPuts, textPuts, idPuts []kv
	var maxSeq uint32
	err = calls.ForEach(func(k, v []byte) error {
		if keySeq(k) > maxSeq {
			maxSeq = keySeq(k)
		}
		if len(v) == 0 || v[0] != 1 {
			return nil
		}
		c, j, err := decodeCallV1Full(k, v)
		if err != nil {
			return err
		}
		key := append([]byte(nil), k...)
		// Totals from the attempts, which are rewritten too.
		c.Attempts, c.Waited, c.Classes = 0, 0, nil
		ac := attempts.Cursor()
		for ak, av := ac.Seek(key); len(ak) > keyLen && string(ak[:keyLen]) == string(key); ak, av = ac.Next() {
			var a retry.Attempt
			if len(av) > 0 && av[0] == 1 {
				var ja attemptV1
				if err := json.Unmarshal(av[1:], &ja); err != nil {
					return fmt.Errorf("attempt %x (schema 1): %w", ak, err)
				}
				a = attemptFromV1(&ja)
				if a.PartialText != "" {
					textPuts = append(textPuts, kv{textKey(key, textPartial, a.N), []byte(a.PartialText)})
				}
				attPuts = append(attPuts, kv{append([]byte(nil), ak...), encodeAttempt(&a, c.Started, c.Chain)})
			} else {
				if a, err = decodeAttempt(ak, av, c.Started, c.Chain); err != nil {
					return err
				}
			}
			c.Attempts++
			c.Waited += a.Waited + a.Paced
			c.Classes = append(c.Classes, a.Class)
			if a.Class == stream.ClassOK {
				c.TTFT = a.TTFT
			}
		}
		if j.Prompt != "" {
			textPuts = append(textPuts, kv{textKey(key, textPrompt, 0), []byte(j.Prompt)})
		}
		if j.Text != "" {
			textPuts = append(textPuts, kv{textKey(key, textAnswer, 0), []byte(j.Text)})
		}
		callPuts = append(callPuts, kv{key, encodeCall(c)})
		idPuts = append(idPuts, kv{seqKey(keySeq(key)), key})
		return nil
	})
	if err != nil {
		return err
	}
	for _, set := range []struct {
		b   *bolt.Bucket
		kvs []kv
	}{{calls, callPuts}, {attempts, attPuts}, {text, textPuts}, {ids, idPuts}} {
		for _, p := range set.kvs {
			if err := set.b.Put(p.k, p.v); err != nil {
				return err
			}
		}
	}
	// Sequences continue after the highest id in use.
	if calls.Sequence() < uint64(maxSeq) {
		if err := calls.SetSequence(uint64(maxSeq)); err != nil {
			return err
		}
	}
	return tx.Bucket(bMeta).Put(metaSchema, binary.AppendUvarint(nil, SchemaVersion))
}
