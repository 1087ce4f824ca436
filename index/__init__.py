"""kwiki.index."""
