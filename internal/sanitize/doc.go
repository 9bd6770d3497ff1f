// Package sanitize makes untrusted text (a model's answer, a server's error
// message, a request id) safe to print on a terminal.
//
// Whatever a provider, a proxy or anything else answering on its URL sends
// is printed by limitscope: a hostile server could put terminal escape
// sequences in it to rewrite the screen, set the window title, change
// colours for good, or (on some terminals) answer back into the input. Text
// keeps newlines and tabs, and drops every other C0 and C1 control, DEL,
// whole ESC sequences (CSI, OSC, DCS, SOS, PM, APC and the short ones), and
// the Unicode bidi overrides and isolates that reorder what is shown. An
// invalid UTF-8 byte becomes U+FFFD.
//
// Printing edges call Text on a whole string, or keep a Filter per stream
// of deltas so a sequence split across two deltas is still dropped whole.
package sanitize
