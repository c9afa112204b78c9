"""The live dashboard: a pure view of node snapshots and a thin polling loop."""
