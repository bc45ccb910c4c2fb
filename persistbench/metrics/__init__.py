"""Metrics: pure functions on frames and frame pairs, the per-video caches pair metrics share, and the registry of metric specs."""
