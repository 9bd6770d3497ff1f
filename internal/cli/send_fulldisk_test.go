package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limitscope/limitscope/store"
)

// fullDiskEnv makes the test binary a child that runs send under a file
// size limit.
const fullDiskEnv = "LIMITSCOPE_MAIN_TEST_FULLDISK"

// fullDiskSendChild runs `send --sim` over and over with a large prompt
// under a 256 KiB file-size limit (RLIMIT_FSIZE: a full disk as far as this
// process can tell), printing one line per call: its number, exit code,
// whether it printed an answer, and whether it said the call was not saved;
// it stops after two unsaved calls.
func fullDiskSendChild(db string) {
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of killing us
	lim := syscall.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit", err)
		return
	}
	prompt := strings.Repeat("fill the disk ", 1800) // ~25 KiB stored per call
	full := 0
	for i := 0; i < 40 && full < 2; i++ {
		var out, errOut bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: os.Getenv, now: time.Now}
		code := run(context.Background(), a, []string{"send", "--sim", "--max-tokens", "4", "--db", db, "--model", "openai/gpt-5.4-mini", fmt.Sprintf("%d %s", i, prompt)})
		unsaved := strings.Contains(errOut.String(), "not saved")
		if unsaved {
			full++
		}
		fmt.Printf("call %d exit %d answered %v unsaved %v stderr %q\n", i, code, strings.TrimSpace(out.String()) != "", unsaved, errOut.String())
	}
}

// TestSendOnAFullDisk: when the history's disk fills, every send still
// answers and exits 0, says once per command that the call was not saved,
// and every call it did not warn about is in the history, whole.
func TestSendOnAFullDisk(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "state", "history.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(environ(isolatedEnv(t)), fullDiskEnv+"="+db)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var saved []int
	full := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var n, code int
		var answered, unsaved bool
		if _, err := fmt.Sscanf(line, "call %d exit %d answered %t unsaved %t", &n, &code, &answered, &unsaved); err != nil {
			t.Fatalf("child said %q", line)
		}
		if code != exitOK || !answered {
			t.Errorf("call %d: exit %d, answered %v: a full disk must not cost the answer\n%s", n, code, answered, line)
		}
		if unsaved {
			full++
			if !strings.Contains(line, "too large") {
				t.Errorf("call %d: the warning does not say why: %s", n, line)
			}
			continue
		}
		saved = append(saved, n)
	}
	if full == 0 || len(saved) < 3 {
		t.Fatalf("the limit was not hit as expected: %d saved, %d not\n%s", len(saved), full, out)
	}
	// Every call that was not reported unsaved is in the file, whole.
	rd := &store.Reader{Path: db}
	var prompts []string
	if err := rd.Each(context.Background(), store.Filter{}, false, func(c *store.Call) error {
		prompts = append(prompts, c.Prompt)
		return nil
	}); err != nil {
		t.Fatalf("the history after a full disk: %v", err)
	}
	have := map[string]bool{}
	for _, p := range prompts {
		have[strings.SplitN(p, " ", 2)[0]] = true
	}
	for _, n := range saved {
		if !have[fmt.Sprint(n)] {
			t.Errorf("call %d was acknowledged (no warning) but is not in the history", n)
		}
	}
	t.Logf("%d calls saved, %d reported not saved", len(saved), full)
}
