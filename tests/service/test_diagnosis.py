"""The service step that attaches pages to a diagnosis: once per distinct signal, kept across launches and
requests, on the project's real corpus index."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwiki.errors import BadInput, IndexMissing
from kwiki.service.diagnosis import TOP_SIGNALS_WITH_PAGES, SignalPages, diagnose_request

SYN = Path(__file__).resolve().parents[1] / "data" / "ncu_synthetic"
LIMIT = 20 << 20


@pytest.fixture
def counted(searcher, monkeypatch):
    """The session's searcher, with every search it runs recorded."""
    queries: list[str] = []
    real = searcher.search

    def search(q, *args, **kwargs):
        queries.append(q)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(searcher, "search", search)
    return searcher, queries


def test_small_grid_gets_its_pattern_page_first(searcher):
    r = diagnose_request(metrics={"launch__grid_size": 32, "launch__sm_count": 132, "gpu__time_duration.sum": 80000},
                         searcher=searcher, k=3, max_bytes=LIMIT)
    top = r.launches[0].signals[0]
    assert top.signal == "small-grid"
    ids = [p.id for p in top.pages]
    assert top.pages[0].via == "pattern" and ids[0] == "pattern-low-sm-utilization"
    assert any(p.via == "search" for p in top.pages) and len(ids) == len(set(ids))


def test_one_lookup_per_distinct_signal_across_launches_and_requests(counted):
    searcher, queries = counted
    data = (SYN / "raw_multi.csv").read_bytes()
    pages = SignalPages(searcher)
    r = diagnose_request(data=data, filename="raw_multi.csv", searcher=searcher, k=4, max_bytes=LIMIT, pages=pages)
    assert len(r.launches) == 3
    distinct = {s.signal for launch in r.launches for s in launch.signals[:TOP_SIGNALS_WITH_PAGES]}
    assert len(queries) == pages.lookups == len(distinct) < sum(min(len(x.signals), TOP_SIGNALS_WITH_PAGES) for x in r.launches)
    assert all(s.pages for launch in r.launches for s in launch.signals[:TOP_SIGNALS_WITH_PAGES])
    again = diagnose_request(data=data, filename="raw_multi.csv", searcher=searcher, k=4, max_bytes=LIMIT, pages=pages)
    assert len(queries) == len(distinct)  # the next request ran no search
    assert again.launches[0].signals[0].pages == r.launches[0].signals[0].pages
    diagnose_request(data=data, filename="raw_multi.csv", searcher=searcher, k=2, max_bytes=LIMIT, pages=pages)
    assert len(queries) == 2 * len(distinct)  # another k is another lookup


def test_search_failure_is_a_warning_and_not_cached(searcher, monkeypatch):
    def fail(*args, **kwargs):
        raise IndexMissing("no index")

    monkeypatch.setattr(searcher, "search", fail)
    pages = SignalPages(searcher)
    r = diagnose_request(metrics={"launch__grid_size": 32, "launch__sm_count": 132}, searcher=searcher, max_bytes=LIMIT,
                         pages=pages)
    assert r.launches[0].signals[0].signal == "small-grid"
    assert r.launches[0].signals[0].pages[0].via == "pattern"  # the pattern page needs no search
    assert any("search for small-grid failed" in w for w in r.warnings)
    monkeypatch.undo()
    again = diagnose_request(metrics={"launch__grid_size": 32, "launch__sm_count": 132}, searcher=searcher,
                             max_bytes=LIMIT, pages=pages)
    assert not again.warnings and any(p.via == "search" for p in again.launches[0].signals[0].pages)


def test_without_an_index_no_pages_and_bad_k_refused():
    r = diagnose_request(metrics={"launch__grid_size": 32, "launch__sm_count": 132}, max_bytes=LIMIT)
    assert r.launches[0].signals[0].signal == "small-grid" and not r.launches[0].signals[0].pages
    for bad in (0, 51):
        with pytest.raises(BadInput, match="out of range"):
            diagnose_request(metrics={"launch__grid_size": 1}, k=bad, max_bytes=LIMIT)
