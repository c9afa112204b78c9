"""Devnet plumbing shared by the commands and the benchmarks: its files, its readiness."""
