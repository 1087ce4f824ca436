"""kwiki.ingest."""
