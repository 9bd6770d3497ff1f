#!/bin/sh
# Regenerates the console captures (README.md, docs/commands.md) from the real binary: it builds
# limitscope, runs it in a private tmux server at 120x40 on the simulator
# (no key, a fresh history), plays the failover demo the README describes
# and writes what tmux shows between the documents' capture markers
# (<!-- capture:NAME --> ... <!-- /capture:NAME -->).
#
#   sh docs/capture-readme.sh        (from the repository's root; needs tmux)
set -eu
command -v tmux >/dev/null || { echo "capture-readme: needs tmux" >&2; exit 2; }
dir=$(mktemp -d)
sock="lscap$$"
cleanup() { tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
go build -o "$dir/limitscope" .

# wait_for TEXT: poll the pane until it shows TEXT (30 s at most).
wait_for() {
	i=0
	until tmux -L "$sock" capture-pane -p -t cap | grep -qF -- "$1"; do
		i=$((i + 1))
		[ "$i" -lt 300 ] || { echo "capture-readme: no \"$1\" on the screen" >&2; tmux -L "$sock" capture-pane -p -t cap >&2; exit 1; }
		sleep 0.1
	done
}
keys() { tmux -L "$sock" send-keys -t cap "$@"; }

tmux -L "$sock" -f /dev/null new-session -d -s cap -x 120 -y 40 \
	"env -i HOME=$dir PATH=$PATH TERM=xterm-256color LIMITSCOPE_DB=$dir/history.db XDG_STATE_HOME=$dir XDG_CONFIG_HOME=$dir $dir/limitscope --seed ${SEED:-3}"
wait_for "Type a prompt"
keys -l "hello there"
keys Enter
wait_for "served by"
keys Tab
sleep 0.3
keys d
wait_for "failover-demo"
keys 5
wait_for "Injected failover-demo"
keys i
keys -l "failover please"
keys Enter
wait_for "(fallback:"
sleep 1 # the countdown moves on a little, as a person would see it
tmux -L "$sock" capture-pane -p -t cap >"$dir/console"
keys Escape
sleep 0.3
keys t
wait_for "timeline (esc back)"
tmux -L "$sock" capture-pane -p -t cap | sed -n 2,7p >"$dir/timeline"

# Put each capture between its markers.
. docs/capture-put.sh
put_captures "$dir" console timeline
echo "capture-readme: README.md and docs/commands.md updated (console, timeline)" >&2
