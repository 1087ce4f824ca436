"""Compare (issue 16 point 1) on the H200 before/after pairs in profiling/fixtures/verify/."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kwiki.errors import BadInput
from kwiki.profiling.compare import VERDICT_RULE, compare_bytes, judge_speedup, noise_band
from kwiki.service.diagnosis import diagnose_request

VERIFY = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"
# bundle -> the problem the fix must resolve, and the unprofiled speed-up measured in the same capture (results.txt)
PAIRS = {
    "coalescing": ("uncoalesced-global", 143.20 / 56.77),
    "bank_conflicts": ("smem-bank-conflicts", 90.94 / 41.63),
    "tail_effect": ("tail-effect", 255.65 / 176.80),
    "atomics": ("atomic-contention", 7385.70 / 25.57),
    "register_spill": ("register-spilling", 1265.15 / 116.90),
    "divergence": ("warp-divergence", 160.54 / 86.91),
}


def read(name: str) -> bytes:
    return gzip.decompress((VERIFY / name).read_bytes())


@pytest.mark.parametrize("bundle", sorted(PAIRS))
def test_every_pair_reports_its_problem_resolved_with_the_speedup(bundle):
    problem, measured = PAIRS[bundle]
    c = compare_bytes(read(f"{bundle}-bad.raw.csv.gz"), f"{bundle}-bad", read(f"{bundle}-fixed.raw.csv.gz"), f"{bundle}-fixed")
    (k,) = c.kernels
    assert k.matched_by == "only-kernel" and k.before_kernel.startswith(f"{bundle}_bad") and k.after_kernel.startswith(f"{bundle}_fixed")
    assert c.verdict == k.verdict == "improved"
    assert k.before_top == problem and problem in [s.signal for s in k.resolved]
    assert problem not in [s.signal for s in k.appeared + k.persisting]
    # ncu's serialized replays agree with the unprofiled timings within 25% on the speed-up
    assert 0.75 < k.speedup / measured < 1.35, (k.speedup, measured)
    assert k.deltas[0].metric == "duration (ns)" and k.deltas[0].ratio == pytest.approx(1 / k.speedup, rel=0.02)


def test_several_launches_set_the_noise_band_and_the_rule_is_returned():
    c = compare_bytes(read("coalescing-bad.raw.csv.gz"), "b", read("coalescing-fixed.raw.csv.gz"), "a")
    k = c.kernels[0]
    assert k.before_launches == k.after_launches == 3
    assert 0.02 <= k.noise < 0.05  # twice the measured spread (about 1%), above the 2% floor
    assert c.rule == VERDICT_RULE and "median" in c.rule
    d = {x.metric: x for x in k.deltas}
    assert d["global load sectors per request"].before == pytest.approx(32, rel=0.01)
    assert d["global load sectors per request"].after == pytest.approx(4, rel=0.01)


def test_the_same_export_twice_is_within_noise_and_matches_by_name():
    data = read("torch-model.raw.csv.gz")
    c = compare_bytes(data, "m", data, "m")
    assert c.verdict == "within-noise" and c.speedup == 1.0
    assert len(c.kernels) == 10 and {k.matched_by for k in c.kernels} == {"name"}
    assert all(not k.resolved and not k.appeared for k in c.kernels)


def test_noise_rule():
    assert noise_band([100.0], [50.0]) == 0.05
    assert noise_band([100.0, 101.0, 99.0], [50.0, 50.2]) == 0.04
    assert judge_speedup(1.04, 0.05) == "within-noise" and judge_speedup(1.06, 0.05) == "improved"
    assert judge_speedup(0.94, 0.05) == "regressed"


def test_a_regression_reads_as_one():
    c = compare_bytes(read("tail_effect-fixed.raw.csv.gz"), "fixed", read("tail_effect-bad.raw.csv.gz"), "bad")
    assert c.verdict == "regressed" and [s.signal for s in c.kernels[0].appeared] == ["tail-effect"]


def test_diagnose_request_with_a_baseline_and_one_kernel():
    c = diagnose_request(data=read("torch-eager.raw.csv.gz"), filename="after", baseline=read("torch-eager.raw.csv.gz"),
                         baseline_filename="before", kernel="softmax")
    assert [k.before_kernel for k in c.kernels] and all("SoftMax" in k.before_kernel for k in c.kernels)
    with pytest.raises(BadInput):
        diagnose_request(baseline=b"x", filename="after")


def test_cli_compares_with_baseline(tmp_path):
    for n in ("tail_effect-bad", "tail_effect-fixed"):
        (tmp_path / f"{n}.raw.csv").write_bytes(read(f"{n}.raw.csv.gz"))
    env = {"HF_HUB_OFFLINE": "1", "KWIKI_INDEX_DIR": str(tmp_path / "noindex"), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "kwiki.service.cli", "diagnose", str(tmp_path / "tail_effect-fixed.raw.csv"),
           "--baseline", str(tmp_path / "tail_effect-bad.raw.csv")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "improved (1.45x)" in out.stdout and "resolved: tail-effect" in out.stdout and "rule: speedup" in out.stdout
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120, env=env)
    doc = json.loads(js.stdout)
    assert doc["verdict"] == "improved" and doc["kernels"][0]["resolved"][0]["signal"] == "tail-effect"
