"""diagnose_* responses, with a stand-in searcher (no index needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kwiki.errors import BadInput, IndexMissing
from kwiki.profiling.diagnose import DiagnoseResponse, diagnose_bytes, diagnose_metrics, diagnose_text

SYN = Path(__file__).resolve().parents[1] / "data" / "ncu_synthetic"


@dataclass
class FakePage:
    key: str
    title: str
    type: str = "pattern"
    corpus: str = "kwiki"
    confidence: str = "source-reported"

    @property
    def id(self) -> str:
        return self.key


@dataclass
class FakeHit:
    id: str
    title: str
    type: str
    corpus: str
    confidence: str
    score: float


@dataclass
class FakeResponse:
    hits: list[FakeHit]


@dataclass
class FakeSearcher:
    pages: dict[str, FakePage] = field(default_factory=lambda: {
        "pattern-low-sm-utilization": FakePage("pattern-low-sm-utilization", "Low SM utilization"),
        "pattern-tail-effect": FakePage("pattern-tail-effect", "Tail effect"),
    })
    queries: list[tuple[str, int]] = field(default_factory=list)
    fail: bool = False

    def find_page(self, key: str, corpus: str | None = None):
        return self.pages.get(key)

    def search(self, q: str, k: int = 10):
        self.queries.append((q, k))
        if self.fail:
            raise IndexMissing("no index")
        return FakeResponse([FakeHit("ncu-section-launch-statistics", "Launch Statistics", "ncu", "kwiki", "source-reported", 0.5),
                             FakeHit("pattern-low-sm-utilization", "Low SM utilization", "pattern", "kwiki", "source-reported", 0.4)])


def test_diagnose_metrics_small_grid_with_pages():
    s = FakeSearcher()
    r = diagnose_metrics({"launch__grid_size": 32, "launch__sm_count": 132, "gpu__time_duration.sum": 80000}, searcher=s, k=3)
    assert isinstance(r, DiagnoseResponse)
    top = r.launches[0].signals[0]
    assert top.signal == "small-grid" and top.magnitude == pytest.approx(1 - 32 / 132, abs=1e-3)
    assert top.patterns[0] == "pattern-low-sm-utilization" and top.techniques and top.symptoms
    ids = [p.id for p in top.pages]
    assert ids[0] == "pattern-low-sm-utilization" and top.pages[0].via == "pattern"
    assert "ncu-section-launch-statistics" in ids and len(ids) == len(set(ids))
    assert s.queries and s.queries[0][1] == 3 and "grid" in s.queries[0][0].lower()
    assert r.launches[0].missing  # other signals could not be evaluated from three metrics
    assert any(m.signal == "long-scoreboard" for m in r.launches[0].missing)


def test_search_failure_is_a_warning():
    r = diagnose_metrics({"launch__grid_size": 32, "launch__sm_count": 132}, searcher=FakeSearcher(fail=True))
    assert r.launches[0].signals[0].signal == "small-grid"
    assert any("search" in w for w in r.warnings)


def test_diagnose_bytes_multi_launch():
    r = diagnose_bytes((SYN / "raw_multi.csv").read_bytes(), "raw_multi.csv")
    assert r.format == "raw" and len(r.launches) == 3
    # three 2.4 us launches in one export
    assert all(d.top == "launch-overhead" for d in r.launches)
    assert r.launches[0].stall_shares["long_scoreboard"] > 0.5
    assert r.took_ms >= 0


def test_diagnose_details_uses_rule_message():
    r = diagnose_bytes((SYN / "details.csv").read_bytes(), "details.csv")
    assert r.launches[0].top == "tail-effect"


def test_diagnose_plain_uses_messages():
    r = diagnose_bytes((SYN / "plain.csv").read_bytes(), "plain.csv")
    assert r.launches[0].top == "smem-bank-conflicts"


def test_diagnose_text_console_output():
    text = """  DRAM Throughput                 %        92.51
  Duration                       us       135.17
  Compute (SM) Throughput         %        15.10
smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio 4.0

On average, only 4.0 of the 32 bytes transmitted per sector are utilized by each thread."""
    r = diagnose_text(text)
    assert r.launches[0].top == "uncoalesced-global"
    assert r.launches[0].key_metrics["duration"] == pytest.approx(135170.0)
    assert r.text_signals and r.text_signals[0]["signal"] == "uncoalesced-global"
    assert diagnose_text("how do I use TMA multicast").launches == []


def test_bad_arguments():
    with pytest.raises(BadInput):
        diagnose_metrics({"nothing": 1})
    with pytest.raises(BadInput):
        diagnose_metrics([1, 2])  # type: ignore[arg-type]
    with pytest.raises(BadInput):
        diagnose_bytes(b"", "x.csv")
    with pytest.raises(BadInput):
        diagnose_bytes(b"x" * 100, "x.csv", max_bytes=10)
    with pytest.raises(BadInput):
        diagnose_metrics({"launch__grid_size": 1}, k=0)


def test_text_pairs_on_separate_lines_are_both_read():
    from kwiki.profiling.diagnose import diagnose_text

    resp = diagnose_text("launch__grid_size = 32\nlaunch__sm_count = 132")
    assert resp.launches and resp.launches[0].top == "small-grid"
