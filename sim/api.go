package sim

// FakeKey is the key every simulated provider accepts. It is not a secret.
const FakeKey = "sim-key-not-a-secret"
