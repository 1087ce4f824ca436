"""kwiki.evals."""
