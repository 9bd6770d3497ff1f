// Package retrytest holds fakes for testing code built on package retry: a
// fake clock and a scripted Doer. Nothing here touches the network or the
// wall clock.
package retrytest
