package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Limits cards (issue 17, `limitscope probe`): each probe's card, a JSON
// document, kept in its own bucket by target and time, so that a later
// session shows it and `history cards` compares a target's cards over time.
// The bucket is made on the first card; files without it read as holding
// none. Cards are not part of the call history: prune and repair leave
// them alone (a repair keeps the call buckets only).

var bCards = []byte("cards")

// MaxCardSize bounds one stored card.
const MaxCardSize = 64 << 10

// CardRecord is one stored card.
type CardRecord struct {
	Target string    // provider[@account]/model
	At     time.Time // when the probe ran
	JSON   []byte    // the card as `probe --json` prints it
}

// cardKey is target, a zero byte and the time in big-endian nanoseconds:
// a target's cards sort oldest first.
func cardKey(target string, at time.Time) []byte {
	k := append([]byte(target), 0)
	return binary.BigEndian.AppendUint64(k, uint64(at.UnixNano()))
}

// SaveCard stores a card for target taken at at.
func SaveCard(path, target string, at time.Time, card []byte) error {
	if len(card) > MaxCardSize {
		return fmt.Errorf("limits card: %d bytes, over %d", len(card), MaxCardSize)
	}
	if target == "" {
		return errors.New("limits card: no target")
	}
	return update(path, DefaultLockTimeout, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bCards)
		if err != nil {
			return fmt.Errorf("cards bucket: %w", err)
		}
		return b.Put(cardKey(target, at), card)
	})
}

// Cards lists the stored cards of target ("" every target), by target and
// then oldest first; at most limit of them (0: all), the newest kept.
func Cards(path, target string, limit int) ([]CardRecord, error) {
	var out []CardRecord
	err := view(path, DefaultLockTimeout, func(tx *bolt.Tx) error {
		if tx == nil {
			return nil
		}
		b := tx.Bucket(bCards)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var prefix []byte
		if target != "" {
			prefix = append([]byte(target), 0)
		}
		for k, v := c.Seek(prefix); k != nil; k, v = c.Next() {
			if len(k) < 9 || k[len(k)-9] != 0 {
				continue // not a card key
			}
			t := string(k[:len(k)-9])
			if target != "" && t != target {
				break
			}
			at := time.Unix(0, int64(binary.BigEndian.Uint64(k[len(k)-8:]))).UTC()
			out = append(out, CardRecord{Target: t, At: at, JSON: append([]byte(nil), v...)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading limits cards: %w", err)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}
