// Package pagetrim gives back the resident pages a process no longer
// needs: on Linux, the pages of its own executable that start-up touched.
package pagetrim
