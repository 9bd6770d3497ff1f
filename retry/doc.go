// Package retry is limitscope's policy. It decides, on error classes alone,
// whether to wait, retry, fail over, stop or defer; paces requests from limit
// snapshots; keeps cooldowns behind an interface; and reports every attempt
// and wait as an Event. It knows no provider, UI or storage.
package retry
