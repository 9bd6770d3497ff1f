# Sourced by capture-readme.sh and capture-bench.sh (from the repository's
# root): put_captures DIR NAME... writes the file DIR/NAME between NAME's
# capture markers (<!-- capture:NAME --> ... <!-- /capture:NAME -->), in
# whichever document holds them: README.md or one of docs/*.md.
put_captures() {
	pdir=$1
	shift
	for name in "$@"; do
		for doc in $(grep -lF -- "<!-- capture:$name -->" README.md docs/*.md); do
			awk -v name="$name" -v file="$pdir/$name" '
				$0 == "<!-- capture:" name " -->" { print; print "```"; while ((getline l < file) > 0) print l; print "```"; skip = 1; next }
				$0 == "<!-- /capture:" name " -->" { skip = 0 }
				!skip { print }
			' "$doc" >"$pdir/doc.md"
			cp "$pdir/doc.md" "$doc"
		done
	done
}
