package retry

// Pacer gates requests per target from the limits snapshots its responses
// carry. It is safe for concurrent use.
type Pacer struct{}
