"""Result analysis: readers of the result files, the headroom model, footprint tables, reports."""
