// Package store is limitscope's attempt history: sessions, calls, attempts
// and their text in one bbolt file, plus the cooldowns that outlive a process.
//
// Nobody holds the file while idle: every batch opens it, runs one
// transaction and closes it, so a TUI, a `send` and a `history` in other
// terminals share it. A Recorder queues the engine's events and commits them
// in batches (and at every call's end) off the caller's path; when the file
// stays locked it warns once and keeps the events in memory until a later
// try succeeds.
//
// At exit, Close waits for the lock only briefly (Options.JournalAfter,
// 500ms): under contention each writer must get the exclusive lock and
// commit in turn, and 200 `send`s with 2 MB prompts cannot all do so in the
// 10 s a command allows. A recorder that cannot get it writes what is queued
// to a journal of its own, <db>.journal/<pid>-<random>.jrnl (mode 0600 in a
// 0700 directory; the same data the history would hold, no prompt or answer
// with --no-content, messages scrubbed as in the history). The file is
// written under a temporary name, synced, renamed and its directory synced;
// its records are length-prefixed and CRC-32C checked and end in an end
// record, so a journal cut short or damaged is never applied, not even in
// part (it is left where it is). Every writer that holds the lock (any
// Recorder commit, cooldown write or prune) first merges complete journals
// in a transaction of their own (up to 32 MiB of them per commit), and every
// Reader query merges them all when the lock is free at that instant. A
// merge records the journal's name in the meta bucket before the file is
// deleted, so a journal merged twice adds nothing twice. Only when the
// journal cannot be written either (a full disk, a read-only directory)
// does Close keep retrying the file until its deadline and report what it
// could not save.
//
// A damaged file never takes the process down: before bbolt maps a file its
// meta pages, root and free list (and, for a small file, every tree link and
// element offset) are checked with plain reads, and a memory fault on a
// damaged page is turned into an error (debug.SetPanicOnFault around every
// transaction). Such a file is reported as ErrCorrupt, with what to run.
package store
