#!/usr/bin/env python3
"""Console CPU and key-press-to-screen latency in tmux.
usage: BIN=./limitscope console-perf.py SCENARIO_FILE WIDTH HEIGHT SECONDS [probe]

Starts the console in a private tmux server at WIDTH x HEIGHT on the embedded
simulator (SIMARGS=" " with OPENAI_BASE_URL/OPENAI_API_KEY set: on a
simulator in another process), sends a prompt, and reports the console's CPU
(utime+stime from /proc/PID/stat) over SECONDS of streaming; with probe,
also key-press-to-screen latency (a letter typed into the input, polled
with capture-pane until it shows), idle and while streaming."""
import subprocess, sys, time, os, statistics, random
scen, W, H, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
probe = len(sys.argv) > 5 and sys.argv[5] == "probe"
S = ["tmux", "-L", "limitscope-perf"]
def t(*a, out=False):
    r = subprocess.run(S + list(a), capture_output=True, text=True)
    return r.stdout
subprocess.run(S + ["kill-server"], capture_output=True)
BIN=os.environ.get("BIN", "./limitscope")
SIMARGS=os.environ.get("SIMARGS", f"--sim --answer paragraph:1MB --scenario-file {scen}")
cmd = f"exec {BIN} {SIMARGS} --no-history --model openai/gpt-5.4-mini --max-tokens 300000 2>/dev/null"
t("new-session", "-d", "-s", "p", "-x", str(W), "-y", str(H), cmd)
time.sleep(2.5)
pid = int(t("display", "-p", "-t", "p", "#{pane_pid}").strip())
comm = open(f"/proc/{pid}/comm").read().strip()
assert comm == os.path.basename(BIN)[:15], comm  # the console itself, not a shell
def ticks():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime stime (fields 14, 15)
def cap():
    return t("capture-pane", "-p", "-t", "p")
# idle latency first
def lat_sample(ch):
    t("send-keys", "-t", "p", "-l", ch)
    t0 = time.monotonic()
    while True:
        c = cap().splitlines()
        inp = [l for l in c if l.startswith("┃>") or l.startswith("│>")]
        line = inp[-1] if inp else ""
        if (marker + ch)[-24:] in line:
            return (time.monotonic() - t0) * 1000
        if time.monotonic() - t0 > 5:
            return 5000.0
marker = ""
def probe_run(n, gap):
    global marker
    lats = []
    for i in range(n):
        ch = "abcdefghijklmnopqrstuvwxyz"[i % 26]
        lats.append(lat_sample(ch))
        marker += ch
        time.sleep(gap * (0.5 + random.random()))
    return lats
def pct(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
if probe:
    idle = probe_run(20, 0.1)
    print(f"idle latency ms: p50 {pct(idle,50):.1f} p95 {pct(idle,95):.1f} max {max(idle):.1f}")
    # clear the input
    for _ in range(len(marker)): t("send-keys", "-t", "p", "BSpace")
    marker = ""
    time.sleep(0.5)
t("send-keys", "-t", "p", "-l", "go")
t("send-keys", "-t", "p", "Enter")
t0 = time.monotonic()
while "STREAMING" not in cap():
    if time.monotonic() - t0 > 20: sys.exit("no STREAMING")
    time.sleep(0.01)
start_w, start_c = time.monotonic(), ticks()
print(f"streaming after {time.monotonic()-t0:.2f}s")
windows = []
last_w, last_c = start_w, start_c
lats = []
while time.monotonic() - start_w < secs:
    if probe:
        lats += probe_run(10, 0.2)
    else:
        time.sleep(5)
    w, c = time.monotonic(), ticks()
    windows.append(((c - last_c) / 100) / (w - last_w) * 100)
    last_w, last_c = w, c
    if "STREAMING" not in cap():
        print("stream ended"); break
end_w, end_c = time.monotonic(), ticks()
print(f"cpu over {end_w-start_w:.1f}s: {((end_c-start_c)/100)/(end_w-start_w)*100:.1f}% of a core; windows: " + " ".join(f"{x:.0f}%" for x in windows))
if lats:
    print(f"streaming latency ms (n={len(lats)}): p50 {pct(lats,50):.1f} p90 {pct(lats,90):.1f} p95 {pct(lats,95):.1f} max {max(lats):.1f}; worst: " + " ".join(f"{x:.0f}" for x in sorted(lats)[-8:]))
print("load", open("/proc/loadavg").read().strip())
scr = cap()
print("\n".join(l for l in scr.splitlines() if "openai" in l)[:2000])
subprocess.run(S + ["kill-server"], capture_output=True)
