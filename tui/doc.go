// Package tui is limitscope's console: a Bubble Tea program that sends prompts
// through the retry engine and shows, as they happen, every attempt, wait,
// fallback and limit.
//
// The engine runs outside Update: a call runs on its own goroutine and its
// events reach the program through one feed that coalesces text deltas to
// about one frame and never drops any other event. One clock tick drives
// every countdown on screen, and only while something counts down.
package tui
