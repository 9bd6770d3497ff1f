package pagetrim

// ReleaseExecutable drops the process's mappings of the read-only pages of
// its own executable (code, read-only data, the function tables) that are
// resident, and returns their size in bytes. The pages stay in the page
// cache: the ones the process still runs are mapped again when touched, so
// its resident set afterwards holds what it uses from then on rather than
// everything its start-up touched (the initialisation of every package).
// Only private mappings with no page copied on write are released, so no
// content is lost. Elsewhere than on Linux it does nothing.
func ReleaseExecutable() (int64, error) {
	return releaseExecutable()
}
