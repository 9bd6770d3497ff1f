#!/bin/sh
# Regenerates the bench captures (docs/retry-core.md) from the real binary: it builds
# limitscope, runs each bench command the document shows (on the simulator,
# minutes each) and writes "$ command" and its output between the
# document's capture markers (<!-- capture:NAME --> ... <!-- /capture:NAME -->).
#
#   sh docs/capture-bench.sh        (from the repository's root)
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/limitscope" .

# run NAME COMMAND...: appends "$ limitscope COMMAND" and its stdout to NAME's capture.
run() {
	name=$1
	shift
	{
		[ -s "$dir/$name" ] && echo
		echo "\$ limitscope $*"
		env -i HOME="$dir" PATH="$PATH" LIMITSCOPE_DB="$dir/history.db" "$dir/limitscope" "$@"
	} >>"$dir/$name"
}
run bench-limits bench --sim --scenario bench --model openai/gpt-5.4-mini --requests 120 --concurrency 16
run bench-limits bench --sim --scenario bench --model anthropic/claude-haiku-5-5 --requests 120 --concurrency 16
run bench-spend-cap bench --sim --scenario spend-cap --model openai/gpt-5.4-mini --requests 120 --concurrency 16
run bench-spend-cap bench --sim --scenario spend-cap --model anthropic/claude-haiku-5-5 --requests 120 --concurrency 16

. docs/capture-put.sh
put_captures "$dir" bench-limits bench-spend-cap
