package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Limits cards (`limitscope probe`): each probe's card, a JSON
// document, kept in its own bucket by target and time, so that a later
// session shows it and `history cards` compares a target's cards over time.
// The bucket is made on the first card; files without it read as holding
// none. Cards are not part of the call history: prune leaves them alone;
// repair copies them like the call records, each checked (validCard), and
// salvages them from pages bbolt cannot reach.

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
	if !validCardTarget([]byte(target)) {
		return fmt.Errorf("limits card: target %q is not provider/model", target)
	}
	if !validCardJSON(target, card) {
		return errors.New("limits card: not a JSON object, or one naming another target")
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

// maxCardTarget bounds a card key's target: longer ones are damage.
const maxCardTarget = 512

// validCardTarget reports whether t can be a card's target: provider/model
// in printable UTF-8, without a zero byte (the key's separator).
func validCardTarget(t []byte) bool {
	if len(t) < 3 || len(t) > maxCardTarget || !utf8.Valid(t) || bytes.IndexByte(t, '/') <= 0 {
		return false
	}
	for _, r := range string(t) {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// validCardJSON reports whether card is a JSON object of at most
// MaxCardSize bytes whose "target" member, when it has one, is target.
func validCardJSON(target string, card []byte) bool {
	card = bytes.TrimSpace(card)
	if len(card) < 2 || len(card) > MaxCardSize || card[0] != '{' || !json.Valid(card) {
		return false
	}
	var head struct {
		Target *string `json:"target"`
	}
	if json.Unmarshal(card, &head) != nil {
		return false // a "target" that is not a string
	}
	return head.Target == nil || *head.Target == target
}

// validCard reports whether k and v are a card as SaveCard stores them:
// the key a target, a zero byte and 8 bytes of time, the value the card.
// Repair copies only such records, and salvage recognises cards by it.
func validCard(k, v []byte) bool {
	return validCardKey(k) && validCardJSON(string(k[:len(k)-9]), v)
}

// validCardKey reports whether k is a card's key: a target, a zero byte
// and 8 bytes of time.
func validCardKey(k []byte) bool {
	return len(k) >= 9 && k[len(k)-9] == 0 && validCardTarget(k[:len(k)-9])
}
