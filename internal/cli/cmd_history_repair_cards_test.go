package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/store"
)

// `history repair` of a file holding limits cards, one of whose pages is
// damaged on disk: `history cards` lists every card of the intact pages
// after it, and the repair's line counts the cards it copied.
func TestHistoryRepairKeepsCards(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state", "history.db")
	env := map[string]string{"LIMITSCOPE_DB": db}
	seedHistory(t, db)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const n = 30
	for i := range n {
		card := fmt.Sprintf(`{"target":"openai/gpt-5.4-mini","at":%q,"answers":[%s],"marker":"m%03d"}`,
			at.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano), strings.TrimSuffix(strings.Repeat(`"ok",`, 250), ","), i)
		if err := store.SaveCard(db, "openai/gpt-5.4-mini", at.Add(time.Duration(i)*time.Minute), []byte(card)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	pageOf := func(marker string) int {
		for id := 2; (id+1)*ps <= len(raw); id++ {
			if bytes.Contains(raw[id*ps:(id+1)*ps], []byte(`"marker":"`+marker+`"`)) {
				return id
			}
		}
		t.Fatalf("card %s not in the file", marker)
		return 0
	}
	bad := pageOf("m015")
	onBad := 0
	for i := range n {
		if pageOf(fmt.Sprintf("m%03d", i)) == bad {
			onBad++
		}
	}
	for i := 16; i < 48; i++ { // its element table points outside the page
		raw[bad*ps+i] = 0xee
	}
	if err := os.WriteFile(db, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := histRun(t, env, false, runHistory, "repair")
	var copied int
	if m := regexp.MustCompile(`(\d+) cards`).FindStringSubmatch(out); m != nil {
		copied, _ = strconv.Atoi(m[1])
	}
	if code != 0 || copied < n-onBad || copied > n {
		t.Fatalf("repair (%d cards on the damaged page): %d %q %q", onBad, code, out, errOut)
	}
	code, out, errOut = histRun(t, env, false, runHistory, "cards", "--json")
	var doc struct {
		Cards []struct {
			Target string `json:"target"`
		} `json:"cards"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("cards: %d %v %q %q", code, err, out, errOut)
	}
	if len(doc.Cards) != copied {
		t.Fatalf("after repair %d cards, want the %d of the intact pages", len(doc.Cards), n-onBad)
	}
}
