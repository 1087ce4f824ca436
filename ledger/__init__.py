"""The candidate ledger: a record per kernel candidate tried, what it changed and how it fared.

One package, one public API (import from ``kwiki.ledger``, never from its modules):

* records (:mod:`.store`): :class:`Candidate` and its parts, and the reader of JSONL-era workspaces;
* storage (:mod:`.db`): :class:`Ledger`, one interface over a workspace's SQLite file (the default, no server) or a
  team's PostgreSQL database (``KWIKI_LEDGER_URL``): transactional writes, versioned schema (:data:`MIGRATIONS`),
  lineage in recursive SQL, full-text search -- the ledger is its own small retrieval source;
* operations (:mod:`.ops`): which ledger to open, checking references, filtering, importing, attaching a diagnosis,
  a workspace's candidates as a page source;
* the lineage tree (:mod:`.tree`);
* rendering into pages (:mod:`.pages`): each candidate as a page of type ``experience``, and the per-page summary.

The index knows nothing of the ledger; the service puts the two together (``docs/ledger.md``)::

    >>> from kwiki.ledger import Candidate, page_id
    >>> page_id(Candidate(id="C07", task="Transpose"))
    'cand-transpose-c07'
"""

from __future__ import annotations

from .db import DB_FILE, MIGRATIONS, SCHEMA_VERSION, Ledger, Migration
from .ops import (
    applies_to,
    attach_diagnosis,
    check_references,
    filter_candidates,
    import_dir,
    ledger_pages,
    ledger_source,
    open_ledger,
    workspace_dir,
)
from .pages import (
    CORPUS,
    PAGE_TYPE,
    candidate_architectures,
    candidate_fields,
    candidate_hit,
    candidate_page,
    candidate_tags,
    candidate_title,
    indexed_candidates,
    ledger_summary,
    page_id,
    render_body,
)
from .store import (
    BENCHMARK_FILE,
    BENCH_COLUMNS,
    CANDIDATES_FILE,
    MAX_RECORD_BYTES,
    STATUSES,
    Author,
    Benchmark,
    Candidate,
    Correctness,
    Evidence,
    JsonlWorkspace,
    LedgerRead,
    LineProblem,
    Status,
    nearest,
    validation_reason,
)
from .tree import TaskTree, TreeRow, lineage, render_tree

__all__ = [
    "BENCH_COLUMNS", "BENCHMARK_FILE", "CANDIDATES_FILE", "CORPUS", "DB_FILE", "MAX_RECORD_BYTES", "MIGRATIONS", "PAGE_TYPE",
    "SCHEMA_VERSION", "STATUSES", "Author", "Benchmark", "Candidate", "Correctness", "Evidence", "JsonlWorkspace", "Ledger",
    "LedgerRead", "LineProblem", "Migration", "Status", "TaskTree", "TreeRow", "applies_to", "attach_diagnosis",
    "candidate_architectures", "candidate_fields", "candidate_hit", "candidate_tags", "candidate_title", "candidate_page", "check_references", "filter_candidates", "import_dir", "indexed_candidates",
    "ledger_pages", "ledger_source", "ledger_summary", "lineage", "nearest", "open_ledger", "page_id", "render_body",
    "render_tree", "validation_reason", "workspace_dir",
]
