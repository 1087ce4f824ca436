"""profiling/catalog.yaml and signals.yaml: size, stall reasons, name resolution, cross-references."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kwiki.profiling.catalog import load_catalog
from kwiki.profiling.signals import SIGNAL_IDS, load_signals

REPO = Path(__file__).resolve().parents[2]
STALLS = ["barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait", "gmma", "warpgroup_arrive"]


def test_catalog_loads_with_enough_metrics():
    cat = load_catalog()
    assert len(cat) >= 150
    ids = [m.id for m in cat.metrics]
    assert len(ids) == len(set(ids))
    for m in cat.metrics:
        assert m.names or m.other_names, m.id
        assert m.meaning and m.unit is not None
        assert set(m.feeds) <= set(SIGNAL_IDS), (m.id, m.feeds)


@pytest.mark.parametrize("reason", STALLS)
def test_every_stall_reason_present(reason):
    cat = load_catalog()
    assert reason in cat.stall_reasons
    assert cat.get(f"stall_{reason}") is not None
    assert cat.get(f"stall_{reason}_samples") is not None


@pytest.mark.parametrize("name,expected", [
    ("smsp__pcsamp_warps_issue_stalled_long_scoreboard", "stall_long_scoreboard_samples"),
    ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "stall_long_scoreboard"),
    ("smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio", "stall_long_scoreboard"),
    ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active", "stall_long_scoreboard"),
    ("smsp__pcsamp_warps_issue_stalled_no_instructions", "stall_no_instruction_samples"),
    ("smsp__pcsamp_warps_issue_stalled_no_instruction", "stall_no_instruction_samples"),
    ("smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio", "stall_gmma"),
    ("Stall Long Scoreboard", "stall_long_scoreboard"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_throughput_pct"),
    ("sm__throughput", "sm_throughput_pct"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_throughput_pct"),
    ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram_throughput_pct"),
    ("sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active", "pipe_tensor_hmma_cycles_pct"),
    ("sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active", "pipe_tc_cycles_pct"),
    ("launch__grid_size [block]", "grid_size"),
    ("Duration (usecond)", "duration"),
    ("achieved occupancy", "achieved_occupancy"),
    ("Registers Per Thread", "registers_per_thread"),
    ("Waves Per SM", "waves_per_sm"),
    ("Compute (SM) Throughput", "sm_throughput_pct"),
    ("Block Limit Registers", "occ_limit_registers"),
    ("Block Limit Shared Mem", "occ_limit_shared_mem"),
    ("Theoretical Occupancy", "theoretical_occupancy"),
    ("L1/TEX Hit Rate", "l1_hit_rate"),
    ("Grid Size", "grid_size"),
    ("Block Size", "block_size"),
    ("DRAM Throughput", "dram_throughput_pct"),
    ("Memory Throughput", "memory_throughput_pct"),
    ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", "bytes_per_sector_global_ld"),
])
def test_resolve_across_spellings(name, expected):
    assert load_catalog().resolve(name) == expected


def test_resolve_section_and_strict():
    cat = load_catalog()
    assert cat.resolve("Memory Throughput", section="Memory Workload Analysis") == "dram_bytes_per_second"
    assert cat.resolve("Memory Throughput", section="GPU Speed Of Light Throughput") == "memory_throughput_pct"
    # strict mode (file parsers) does not fold a .max/.min column onto the .avg metric
    assert cat.resolve("sm__throughput.max.pct_of_peak_sustained_elapsed", strict=True) is None
    assert cat.resolve("smsp__inst_executed.min", strict=True) is None
    assert cat.resolve("dram__bytes_read", strict=True) == "dram_bytes_read"
    for bad in ("", "   ", "foo", "x" * 1000, "__", "hello world"):
        assert cat.resolve(bad) is None


def test_as_list_is_plain_data():
    rows = load_catalog().as_list()
    assert rows and {"id", "names", "unit", "meaning", "feeds"} <= set(rows[0])


def test_catalog_names_appear_in_corpus_frontmatter():
    """Every metric name the corpus pages list in frontmatter resolves in the catalog."""
    names: set[str] = set()
    for folder in ("ncu", "patterns"):
        for path in (REPO / "corpus" / "wiki" / folder).glob("*.md"):
            front = path.read_text(encoding="utf-8").split("---")[1]
            names |= set(re.findall(r"(?:sm_\d+|[a-z_]+):\s+([a-z]+__[A-Za-z0-9_.]+)\s*$", front, re.M))
    if not names:
        pytest.skip("corpus frontmatter not available")
    cat = load_catalog()
    unresolved = sorted(n for n in names if cat.resolve(n) is None)
    assert not unresolved, unresolved


def test_signals_file_is_complete():
    sigs = load_signals()
    assert list(sigs) == list(SIGNAL_IDS)
    for s in sigs.values():
        assert s.patterns and all(p.startswith("pattern-") for p in s.patterns)
        assert s.symptoms and s.phrases and s.techniques
        assert all(t.startswith("technique-") for t in s.techniques)
        assert set(s.explains) <= set(SIGNAL_IDS)
        assert s.thresholds, s.id
        for name, th in s.thresholds.items():
            assert th.source == "kwiki-heuristic" or th.source.split("-")[0] in ("doc", "blog", "paper"), (s.id, name)
            assert th.note, (s.id, name)


def test_threshold_sources_are_corpus_sources():
    folder = REPO / "corpus" / "sources"
    if not folder.exists():
        pytest.skip("no corpus checkout")
    have = {p.stem for p in folder.rglob("*.md")}
    for s in load_signals().values():
        for name, th in s.thresholds.items():
            assert th.source == "kwiki-heuristic" or th.source in have, (s.id, name, th.source)


def test_signal_patterns_exist_in_corpus():
    folder = REPO / "corpus" / "wiki" / "patterns"
    if not folder.exists():
        pytest.skip("no corpus checkout")
    have = {f"pattern-{p.stem}" for p in folder.glob("*.md")}
    for s in load_signals().values():
        assert set(s.patterns) <= have, (s.id, set(s.patterns) - have)
