// Package theme holds limitscope's looks: a few semantic colour tokens (base,
// subtle, accent, ok, warn, error, wait) chosen for a light or a dark terminal,
// and the one Styles struct built from them. Nothing else in the program names
// a colour.
package theme
