"""The candidate ledger: a record per kernel candidate tried, what it changed and how it fared.

One package, one public API (import from ``kwiki.ledger``, never from its modules):

* records and storage (:mod:`.store`): :class:`Candidate` and its parts, :class:`Ledger` (an append-only,
  flock-guarded workspace of ``candidates.jsonl`` + ``benchmark.csv``);
* operations (:mod:`.ops`): where a workspace lives, filtering, importing, attaching a diagnosis;
* the lineage tree (:mod:`.tree`);
* rendering into index pages (:mod:`.pages`): each candidate as a page of type ``experience``, given to the
  index as a generic :class:`~kwiki.ingest.models.PageSource`, and the per-page summary of candidates.

The index knows nothing of the ledger; the service puts the two together (``docs/ledger.md``)::

    >>> from kwiki.ledger import Candidate, page_id
    >>> page_id(Candidate(id="C07", task="Transpose"))
    'cand-transpose-c07'
"""

from __future__ import annotations

from .ops import applies_to, attach_diagnosis, filter_candidates, import_dir, workspace_dir
from .pages import (
    CORPUS,
    PAGE_TYPE,
    candidate_fields,
    candidate_page,
    indexed_candidates,
    ledger_pages,
    ledger_source,
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
    Ledger,
    LedgerRead,
    LineProblem,
    Status,
)
from .tree import TaskTree, TreeRow, lineage, render_tree

__all__ = [
    "BENCH_COLUMNS", "BENCHMARK_FILE", "CANDIDATES_FILE", "CORPUS", "MAX_RECORD_BYTES", "PAGE_TYPE", "STATUSES",
    "Author", "Benchmark", "Candidate", "Correctness", "Evidence", "Ledger", "LedgerRead", "LineProblem", "Status",
    "TaskTree", "TreeRow", "applies_to", "attach_diagnosis", "candidate_fields", "candidate_page", "filter_candidates",
    "import_dir", "indexed_candidates", "ledger_pages", "ledger_source", "ledger_summary", "lineage", "page_id",
    "render_body", "render_tree", "workspace_dir",
]
