"""Benchmark drivers behind `qmemo bench <suite>`."""
