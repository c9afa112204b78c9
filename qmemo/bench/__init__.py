"""Benchmark drivers behind `qmemo bench <suite>`, and the C baseline's reader (`c_baseline`)."""
