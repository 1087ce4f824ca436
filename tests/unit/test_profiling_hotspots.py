"""Source hotspots (issue 16 point 2) from the H200 source-page exports in profiling/fixtures/verify/
(`ncu --import R --page source --csv --print-source cuda,sass`, built with -lineinfo, --import-source yes)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kwiki.errors import BadInput
from kwiki.profiling.diagnose import diagnose_bytes
from kwiki.profiling.hotspots import is_source_page, parse_source_page
from kwiki.service.diagnosis import diagnose_request

VERIFY = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"

# export -> (hot line, its file's name, a signal the hot line's own counters or stalls point to or None)
HOT = {
    "coalescing-bad": (128, "coalescing.cu", "uncoalesced-global"),
    "coalescing-fixed": (133, "coalescing.cu", "long-scoreboard"),
    "bank_conflicts-bad": (136, "bank_conflicts.cu", "smem-bank-conflicts"),
    "bank_conflicts-fixed": (131, "bank_conflicts.cu", "long-scoreboard"),
    "atomics-bad": (127, "atomics.cu", "atomic-contention"),
    "atomics-fixed": (132, "atomics.cu", "long-scoreboard"),
    "register_spill-bad": (136, "register_spill.cu", "register-spilling"),
    "register_spill-fixed": (136, "register_spill.cu", "long-scoreboard"),
    "divergence-bad": (136, "divergence.cu", None),
    "divergence-fixed": (151, "divergence.cu", "low-ipc"),
    "tail_effect-bad": (130, "tail_effect.cu", "low-ipc"),
    "tail_effect-fixed": (146, "tail_effect.cu", "low-ipc"),
    "smem_occupancy-bad": (130, "smem_occupancy.cu", "long-scoreboard"),
    "torch-triton_strided": (35, "torch_cases.py", "uncoalesced-global"),
    "torch-triton_softmax": (170, "standard.py", "long-scoreboard"),
}


def page(stem: str) -> bytes:
    return gzip.decompress((VERIFY / f"{stem}.source.csv.gz").read_bytes())


@pytest.mark.parametrize("stem", sorted(HOT))
def test_every_source_export_names_its_hot_line(stem):
    line, file, signal = HOT[stem]
    r = parse_source_page(page(stem))
    top = r.hotspots[0]
    assert (top.line, top.file.rsplit("/", 1)[-1]) == (line, file), [(h.line, h.samples) for h in r.hotspots]
    assert top.code and top.samples > 0 and 0 < top.share <= 1 and top.stalls
    if signal:
        assert signal in top.signals
    assert r.view == "cuda,sass" and r.total_samples >= sum(h.samples for h in r.hotspots)


def test_memory_facts_on_the_pathological_lines():
    assert "Excessive 44,040,192 of 56,623,104 (78%)" in parse_source_page(page("coalescing-bad")).hotspots[0].facts[0]
    bank = parse_source_page(page("bank_conflicts-bad")).hotspots[0]
    assert bank.facts == ["L1 Conflicts Shared N-Way 32 (worst instruction)"] and "pattern-shared-memory-bank-conflicts" in bank.patterns
    assert not parse_source_page(page("bank_conflicts-fixed")).hotspots[0].facts  # padded: 1-way
    spill = parse_source_page(page("register_spill-bad")).hotspots[0]
    assert spill.facts[0].startswith("local memory") and "pattern-register-spilling" in spill.patterns
    assert not any("local" in f for f in parse_source_page(page("register_spill-fixed")).hotspots[0].facts)
    div = parse_source_page(page("divergence-bad"))
    culprit = div.hotspots[div.culprit]
    assert culprit.line == 140 and culprit.facts == ["16.1 of 32 threads active per instruction"] and "warp-divergence" in culprit.signals


def test_exit_drain_samples_go_to_the_atomic_that_they_wait_for():
    r = parse_source_page(page("atomics-bad"))
    top = r.hotspots[0]
    assert top.line == 127 and "atomicAdd" in top.code and top.stalls["drain"] > 0.5
    assert "[128]" in top.note and top.facts[0].startswith("global atomic / reduction (REDG")
    assert 128 not in [h.line for h in r.hotspots]


def test_library_kernels_without_line_info_say_so():
    r = parse_source_page(page("torch-gemm_bf16"))
    assert not r.hotspots and "No lineinfo" in r.warnings[0] and "-lineinfo" in r.warnings[-1]
    assert is_source_page(page("torch-eager")) and is_source_page((VERIFY / "torch-eager.source.csv.gz").read_bytes())
    assert not is_source_page(gzip.decompress((VERIFY / "torch-eager.raw.csv.gz").read_bytes()))


def test_few_samples_are_flagged():
    r = parse_source_page(page("atomics-fixed"))  # a 22 us kernel: 1,096 samples
    assert r.total_samples == 1096 and not r.warnings
    small = parse_source_page(page("atomics-fixed"), top=5)
    assert small.hotspots[0].samples == 1034  # 1,029 of its own and 5 of a __shfl_sync inlined from sm_30_intrinsics.hpp


def test_sass_only_view_ranks_instructions():
    # real --print-source sass exports (2nd device call): "Kernel Name" blocks, then Address, Source, metrics
    r = parse_source_page((VERIFY / "coalescing-bad.sass.csv.gz").read_bytes())
    assert r.view == "sass" and r.functions == ["coalescing_bad(const float *, float *, int)"]
    top = r.hotspots[0]
    assert top.line is None and top.address.startswith("0x")
    # ncu charges a load's latency to the instruction that waits for it: the FFMA that consumes the LDG
    assert top.code.startswith("FFMA") and top.stalls["long_scoreboard"] > 0.9 and top.share > 0.9
    bank = parse_source_page((VERIFY / "bank_conflicts-bad.sass.csv.gz").read_bytes())
    lds = bank.hotspots[bank.culprit]
    assert lds.code.startswith("LDS") and lds.facts == ["L1 Conflicts Shared N-Way 32"] and lds.signals[0] == "smem-bank-conflicts"


def test_cuda_only_view_has_no_metrics_and_says_so():
    with pytest.raises(BadInput) as e:
        parse_source_page((VERIFY / "coalescing-bad.cuda.csv.gz").read_bytes())
    assert "no metrics" in e.value.message and "cuda,sass" in e.value.hint


def test_a_source_page_upload_and_a_source_beside_a_raw_export():
    r = diagnose_bytes((VERIFY / "coalescing-bad.source.csv.gz").read_bytes(), "coalescing-bad.source.csv.gz")
    assert r.format == "source" and r.hotspots.hotspots[0].line == 128 and not r.launches
    both = diagnose_request(data=gzip.decompress((VERIFY / "coalescing-bad.raw.csv.gz").read_bytes()), filename="c.raw.csv",
                            source=page("coalescing-bad"))
    assert both.launches[0].top == "uncoalesced-global" == both.hotspots.hotspots[0].signals[0]
    with pytest.raises(BadInput):
        parse_source_page(b'"ID","Kernel Name"\n"0","k"\n')


def test_report_views_without_ncu_report_give_nothing_and_say_nothing_wrong():
    from kwiki.profiling.ncu_csv import ncu_report_module
    from kwiki.profiling.report_views import report_views

    if ncu_report_module() is not None:
        pytest.skip("ncu_report is installed: profiling/fixtures/verify/report_test.txt records the run with it")
    assert report_views(b"NVR\x00") == ({}, None)



def test_samples_on_cuda_toolkit_headers_go_to_the_user_line_before_them():
    # a pointer chase (blind set bl15): the __shfl_sync of sm_30_intrinsics.hpp waits on the load of lists.cu:25
    blind = VERIFY.parent / "blind"
    r = parse_source_page((blind / "bl15.source.csv.gz").read_bytes())
    top = r.hotspots[0]
    assert (Path(top.file).name, top.line) == ("lists.cu", 25) and top.share > 0.9
    assert "sm_30_intrinsics.hpp:373" in top.note
    assert not any("/include/" in h.file and h.samples > 100 for h in r.hotspots)


def test_an_atomic_inlined_from_a_toolkit_header_keeps_its_drain_on_the_user_line():
    # blind2 b2_03: atomicAdd (sm_20_atomic_functions.hpp) per element; the exit's drain waits for those REDs
    r = parse_source_page((VERIFY.parent / "blind2" / "b2_03.source.csv.gz").read_bytes())
    top = r.hotspots[0]
    assert (Path(top.file).name, top.line) == ("b2_dot_atomic.cu", 8)
    assert "atomic-contention" in top.signals and any("REDG" in f for f in top.facts)
    assert "exit line" in top.note and "sm_20_atomic_functions.hpp:84" in top.note
