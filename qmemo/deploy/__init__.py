"""Several hosts: a scenario manifest as a Docker Swarm stack (stack), its folder (files), its results (collect)."""
