"""kwiki.service."""
