"""The transaction generator: workloads, schedules, open-loop sending, latency statistics."""
