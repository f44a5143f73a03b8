"""The lowest layer: what every other layer may use (process entry, crash reports, RNG state,
atomic file writes, stage timers, the base errors). It imports nothing else of fastrl."""
