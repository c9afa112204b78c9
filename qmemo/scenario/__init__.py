"""Scenarios: a devnet on hosts of its own (network namespaces), shaped links, faults on a schedule, invariants."""
