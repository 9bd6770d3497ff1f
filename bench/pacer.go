package bench

import "github.com/limitscope/limitscope/retry"

// defaultPacer is the limitscope policy's pacer when Config.NewPacer is nil.
func defaultPacer() *retry.Pacer { return retry.NewPacer() }
