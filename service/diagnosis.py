"""Diagnosis with pages: profiling turns an export into typed signals, then this step attaches the pages the
index ranks for each of a launch's strongest signals.

Pages depend on the signal and on ``k`` only, never on the launch, so they are looked up once per distinct
signal and kept for the open index (:class:`SignalPages`): an export of 200 launches of one kernel costs one
lookup per signal, not 200 searches, and the next request for the same signal costs none::

    >>> pages = SignalPages(searcher)                                                  # doctest: +SKIP
    >>> resp = diagnose_request(metrics={"launch__grid_size": 32}, searcher=searcher, pages=pages)  # doctest: +SKIP
    >>> [p.id for p in resp.launches[0].signals[0].pages][:1]                          # doctest: +SKIP
    ['pattern-low-sm-utilization']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from kwiki.errors import BadInput, KwikiError, PayloadTooLarge
from kwiki.index.search import Searcher
from kwiki.ledger import Candidate, Evidence, Ledger, attach_diagnosis
from kwiki.profiling.compare import Comparison, compare_bytes, comparison_evidence
from kwiki.profiling.diagnose import DiagnoseResponse, PageRef, check_deadline, diagnose_bytes, diagnose_metrics, diagnose_text
from kwiki.profiling.hotspots import parse_source_page
from kwiki.profiling.signals import load_signals
from kwiki.settings import MAX_UPLOAD_BYTES, PAGES_PER_SIGNAL

#: The strongest signals of a launch get pages; the weaker ones are listed with their pattern ids only.
TOP_SIGNALS_WITH_PAGES = 3
#: A framework program has hundreds of kernels: pages for the launches of the five with the most GPU time.
TOP_KERNELS_WITH_PAGES = 5
#: Pages per signal a caller may ask for (``k``); more is a search, not a diagnosis.
MAX_PAGES_PER_SIGNAL = 50
#: (signal, k) lookups kept per open index: 28 signals at a few values of k fit many times over.
CACHE_ENTRIES = 512


class SignalPages:
    """The pages of each (signal, k) for one open index, looked up once and kept across launches and requests.

    A failed search is reported as a warning and not kept, so a later call tries again.
    """

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher
        self.lookups = 0  # searches actually run (the rest came from the cache)
        self._cache: OrderedDict[tuple[str, int], list[PageRef]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, signal: str, k: int) -> tuple[list[PageRef], list[str]]:
        """(pages, warnings): the signal's pattern pages in every corpus that has them, then a search for it."""
        with self._lock:
            if (signal, k) in self._cache:
                self._cache.move_to_end((signal, k))
                return list(self._cache[(signal, k)]), []
        sdef = load_signals()[signal]
        out: dict[str, PageRef] = {}
        for pid in sdef.patterns:
            for corpus in [None, *sorted(self.searcher.known_corpora)]:
                page = self.searcher.find_page(pid, corpus)
                if page is not None:
                    out.setdefault(page.key, PageRef(id=page.key, title=page.title, type=page.type, corpus=page.corpus,
                                                     confidence=page.confidence, via="pattern"))
        try:
            self.lookups += 1
            for hit in self.searcher.search(sdef.query_text(), k=k).hits:
                out.setdefault(hit.id, PageRef(id=hit.id, title=hit.title, type=hit.type, corpus=hit.corpus,
                                               confidence=hit.confidence, score=hit.score, via="search"))
        except KwikiError as exc:
            return list(out.values())[: max(k, len(sdef.patterns))], [f"search for {signal} failed: {exc.message}"]
        pages = list(out.values())[: max(k, len(sdef.patterns))]
        with self._lock:
            self._cache[(signal, k)] = pages
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return list(pages), []


def attach_pages(resp: DiagnoseResponse, pages: SignalPages, k: int, deadline: float | None = None) -> None:
    """Give the top signals of each launch of the top kernels (by GPU time) their pages; failures become warnings.
    ``deadline`` (``time.monotonic()``) stops it with a 503 ``timeout`` once passed."""
    ranked = {s.kernel for s in resp.kernels[:TOP_KERNELS_WITH_PAGES]}
    for launch in resp.launches:
        if resp.kernels and (launch.kernel or launch.name) not in ranked:
            continue
        for sig in launch.signals[:TOP_SIGNALS_WITH_PAGES]:
            check_deadline(deadline)
            sig.pages, warnings = pages.get(sig.signal, k)
            resp.warnings += [w for w in warnings if w not in resp.warnings]


def diagnose_request(*, data: bytes | None = None, filename: str = "", metrics: dict[str, Any] | None = None,
                     text: str | None = None, searcher: Searcher | None = None, k: int = PAGES_PER_SIGNAL,
                     max_bytes: int = MAX_UPLOAD_BYTES,
                     pages: SignalPages | None = None, baseline: bytes | None = None, baseline_filename: str = "",
                     kernel: str | None = None, source: bytes | None = None,
                     deadline: float | None = None) -> DiagnoseResponse | Comparison:
    """The one diagnose path for HTTP, the web page, CLI and MCP: exactly one of data/metrics/text; with
    ``baseline`` (the parent's export) a :class:`~kwiki.profiling.compare.Comparison` of ``data`` against it
    instead; ``source`` (the same report's ``--page source --csv`` export) adds its hotspots; ``kernel`` keeps
    one kernel's launches. ``deadline`` (``time.monotonic()``) stops the work with a 503 ``timeout`` once passed,
    so it stops with the answer rather than running on in its thread.

    Without a searcher the diagnosis is complete but has no ranked pages. ``pages`` is the open index's cache
    (the service keeps one per loaded index); without it, one lives for this request.
    """
    given = [x is not None for x in (data, metrics, text)]
    if sum(given) != 1:
        raise BadInput("give one of: a file upload, a metrics object, or text",
                       hint='multipart field "file", or JSON {"metrics": {...}} or {"text": "..."}')
    if not isinstance(k, int) or not 1 <= k <= MAX_PAGES_PER_SIGNAL:
        raise BadInput(f"k={k!r} is out of range", hint=f"1 <= k <= {MAX_PAGES_PER_SIGNAL}")
    lookup = (pages if pages is not None and pages.searcher is searcher else SignalPages(searcher)) if searcher else None
    if baseline is not None:
        if data is None:
            raise BadInput("a baseline needs the candidate's export to compare with it", hint='multipart fields "file" and "baseline"')
        for blob, name in ((data, filename or "upload"), (baseline, baseline_filename or "baseline")):
            if len(blob) > max_bytes:
                raise PayloadTooLarge(f"{name} is {len(blob)} bytes; the limit is {max_bytes}",
                                      hint="export only the kernels you need (ncu -k NAME -c N)")
        comparison = compare_bytes(baseline, baseline_filename or "baseline", data, filename or "upload",
                                   max_bytes=max_bytes, kernel=kernel, deadline=deadline)
        if lookup is not None and comparison.after_diagnosis is not None:
            attach_pages(comparison.after_diagnosis, lookup, k, deadline)
        return comparison
    if data is not None:
        if len(data) > max_bytes or (source is not None and len(source) > max_bytes):
            raise PayloadTooLarge(f"upload is {max(len(data), len(source or b''))} bytes; the limit is {max_bytes}",
                                  hint="export only the kernels you need (ncu -k NAME -c N)")
        resp = diagnose_bytes(data, filename or "upload", max_bytes=max_bytes, kernel=kernel, deadline=deadline)
        if source is not None:
            resp.hotspots = parse_source_page(source)
    elif metrics is not None:
        resp = diagnose_metrics(metrics, deadline=deadline)
    else:
        resp = diagnose_text(text or "", deadline=deadline)
    if lookup is not None:
        attach_pages(resp, lookup, k, deadline)
    return resp


def attach_comparison(ledger: Ledger, candidate_id: str, c: Comparison) -> Candidate:
    """Record a comparison on a ledger candidate: the after-diagnosis as its evidence (``attach_diagnosis``, the
    ledger's own schema) plus ``evidence.comparison`` (:func:`~kwiki.profiling.compare.comparison_evidence`).
    Returns the new version."""
    cand = attach_diagnosis(ledger, candidate_id, c.after_diagnosis or DiagnoseResponse(), report_path=c.after)
    extra = dict(cand.evidence.model_extra or {})
    extra["comparison"] = comparison_evidence(c)
    if c.before not in cand.evidence.reports:
        cand.evidence.reports.append(c.before)
    ev = Evidence.model_validate({**cand.evidence.model_dump(exclude=set(extra)), **extra})
    return ledger.append(cand.model_copy(update={"evidence": ev}))
