"""Reporting: metrics against golden fixtures, the metric table and catalog, lessons."""
