"""Reporting: metrics computed from step records, the metric table, the page's generated catalog, load sweeps."""
