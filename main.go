// Command limitscope is a terminal console for LLM API rate limits, retries
// and failover. See README.md.
package main

import "github.com/limitscope/limitscope/internal/cli"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { cli.Main(version) }
