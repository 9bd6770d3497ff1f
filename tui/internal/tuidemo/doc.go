// Command tuidemo runs the console on the real retry engine with a scripted
// Doer on the wall clock, for trying the TUI by hand (tmux). It never
// touches the network.
package main
