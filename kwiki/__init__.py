"""kwiki: retrieval of GPU-kernel optimization knowledge.

The pipeline stages live in top-level folders mapped to subpackages:
``kwiki.ingest``, ``kwiki.index``, ``kwiki.service``, ``kwiki.profiling``, ``kwiki.evals``.
"""

__version__ = "0.1.0"
