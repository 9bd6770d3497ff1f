package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
)

// cardPages returns, for each leaf page of the file holding card key k, the
// page id (cards are found by their unique marker in the raw bytes).
func cardPage(raw []byte, ps int, marker string) int {
	for id := 2; (id+1)*ps <= len(raw); id++ {
		if bytes.Contains(raw[id*ps:(id+1)*ps], []byte(marker)) {
			return id
		}
	}
	return -1
}

// A repair keeps the limits cards: on a file with cards, one of whose
// pages is damaged and one card of another page unreadable, the repaired
// file lists every other card byte for byte, the unreadable one is
// counted and said, and the calls and the cooldown stay too.
func TestRepairKeepsCards(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 30 {
		specs = append(specs, okSpec("c"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Second), tOpenAI))
	}
	recordAll(t, path, SessionInfo{Command: "send"}, specs...)
	cd := NewCooldowns(path, Options{})
	if err := cd.Set(retry.Cooldown{Scope: "account:openai:946ae4c7aaee", Target: tOpenAI.String(), Code: "insufficient_quota", Until: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	type card struct {
		target string
		at     time.Time
		json   string
	}
	var cards []card
	targets := []string{"openai/gpt-5.4-mini", "anthropic@team/claude-haiku-4-5", "gemini/gemini-2.5-flash"}
	for i := range 45 {
		c := card{targets[i%3], t0.Add(time.Duration(i) * time.Minute), ""}
		c.json = fmt.Sprintf(`{"target":%q,"marker":"card-marker-%03d","answers":[%s]}`, c.target, i, strings.TrimSuffix(strings.Repeat(`"ok",`, 200), ","))
		if err := SaveCard(path, c.target, c.at, []byte(c.json)); err != nil {
			t.Fatal(err)
		}
		cards = append(cards, c)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	damagedPage := cardPage(raw, ps, "card-marker-020")
	if damagedPage < 0 {
		t.Fatal("card 20's page not found")
	}
	// The cards on the damaged page are lost; every other one must stay.
	lost := map[int]bool{}
	for i := range cards {
		if cardPage(raw, ps, fmt.Sprintf("card-marker-%03d", i)) == damagedPage {
			lost[i] = true
		}
	}
	// Card 1's value is broken on an intact page: it is no JSON any more.
	broken := 1
	if lost[broken] {
		t.Fatalf("cards 1 and 20 on one page: the test proves less than it says")
	}
	at := bytes.Index(raw, []byte(`{"target":"anthropic@team/claude-haiku-4-5","marker":"card-marker-001"`))
	if at < 0 {
		t.Fatal("card 1 not found in the file")
	}
	raw[at] = '['
	// The damaged page: its element table points outside the page.
	off := damagedPage * ps
	for i := 16; i < 64; i++ {
		raw[off+i] = 0xee
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	res, err := Repair(context.Background(), path, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; problems %v", res.Summary(), res.Problems)
	got, err := Cards(path, "", 0)
	if err != nil {
		t.Fatalf("cards after repair: %v", err)
	}
	byMarker := map[string]CardRecord{}
	for _, g := range got {
		byMarker[string(g.JSON)] = g
	}
	kept, fromDamaged := 0, 0
	for i, c := range cards {
		g, ok := byMarker[c.json]
		switch {
		case i == broken && ok:
			t.Errorf("the unreadable card 1 was copied")
		case i == broken:
		case lost[i]:
			if ok { // an element of the damaged page that still held
				fromDamaged++
			}
		case !ok:
			t.Errorf("card %d (%s) of an intact page lost in repair", i, c.target)
		case g.Target != c.target || !g.At.Equal(c.at):
			t.Errorf("card %d came back as %s at %v", i, g.Target, g.At)
		default:
			kept++
		}
	}
	if len(got) != kept+fromDamaged {
		t.Errorf("repair lists %d cards, %d of them the readable ones and %d from the damaged page", len(got), kept, fromDamaged)
	}
	if want := len(cards) - 1 - len(lost); kept != want || res.Copied["cards"] != want+fromDamaged {
		t.Errorf("kept %d cards, copied %d, want %d (+%d from the damaged page)", kept, res.Copied["cards"], want, fromDamaged)
	}
	t.Logf("%d cards on the damaged page, %d of them salvaged", len(lost), fromDamaged)
	if res.Skipped["cards"] != 1 || !strings.Contains(res.Summary(), "skipped (unreadable) 1 cards") {
		t.Errorf("the unreadable card not counted and said: %s", res.Summary())
	}
	if res.DamagedPages == 0 || !strings.Contains(res.Summary(), "damaged pages") {
		t.Errorf("the damaged page not said: %s", res.Summary())
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 30 {
		t.Errorf("calls after repair: %d %v", len(calls), err)
	}
	if cds, err := NewCooldowns(path, Options{}).List(); err != nil || len(cds) != 1 || cds[0].Code != "insufficient_quota" {
		t.Errorf("cooldowns after repair: %+v %v", cds, err)
	}
	// The repaired file takes new cards.
	if err := SaveCard(path, "openai/gpt-5.4-mini", t0.Add(time.Hour), []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
}

// A bucket this limitscope does not know (a newer one made it) survives a
// repair as it was, and the repair says it was copied unchecked; the
// journal markers of the meta bucket stay.
func TestRepairKeepsABucketOfANewerLimitscope(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("c1", t0, tOpenAI))
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("future"))
		if err != nil {
			return err
		}
		for i := range 100 {
			if err := b.Put([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("v%03d", i))); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(append(bytes.Clone(metaJournalPrefix), "123-abc.jrnl"...), []byte("12345678"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := Repair(context.Background(), path, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Copied["future"] != 100 || !strings.Contains(res.Summary(), `100 of bucket "future"`) || !strings.Contains(strings.Join(res.Problems, "\n"), `"future" is not one this limitscope knows`) {
		t.Errorf("the newer bucket not copied and said: %s; %v", res.Summary(), res.Problems)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("future"))
		if b == nil || string(b.Get([]byte("k042"))) != "v042" || b.Stats().KeyN != 100 {
			t.Errorf("the newer bucket after repair: %v", b)
		}
		if tx.Bucket(bMeta).Get(append(bytes.Clone(metaJournalPrefix), "123-abc.jrnl"...)) == nil {
			t.Error("a journal marker was lost: that journal would be merged twice")
		}
		return nil
	})
}

// A small bucket lives inline, inside its parent's page: when bbolt cannot
// open the file (both meta pages broken), repair reads its records from
// the pages too. The cooldown (a stop a person must clear) and the session
// stay; they were dropped without a word before.
func TestRepairSalvagesInlineBuckets(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{Command: "send"}, okSpec("c1", t0, tOpenAI), okSpec("c2", t0.Add(time.Second), tOpenAI))
	if err := NewCooldowns(path, Options{}).Set(retry.Cooldown{Scope: "account:openai:946ae4c7aaee", Target: tOpenAI.String(), Code: "insufficient_quota"}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{16, 4096 + 16} {
		raw[off+20] ^= 0xff // both meta pages' checksums fail
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Repair(context.Background(), path, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cds, err := NewCooldowns(path, Options{}).List(); err != nil || len(cds) != 1 || cds[0].Code != "insufficient_quota" || res.Copied["cooldowns"] != 1 {
		t.Errorf("the cooldown after repair: %+v %v (%s)", cds, err, res.Summary())
	}
	if res.Copied["sessions"] != 1 || res.Lost["sessions"] != 0 || res.Copied["calls"] != 2 {
		t.Errorf("the session after repair: %s", res.Summary())
	}
}
