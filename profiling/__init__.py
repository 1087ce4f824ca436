"""kwiki.profiling."""
