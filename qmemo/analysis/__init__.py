"""Result analysis: the C baseline reader, the headroom model, footprint tables, reports."""
