// Package fleettest starts a real redis-server for tests of the shared
// state: on a free loopback port, in a temporary directory, stopped at the
// test's end. Without redis-server a test skips, unless CI=true (then it
// fails: CI installs it).
package fleettest
