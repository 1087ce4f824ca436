"""PM-sampling timelines (issue 16 point 3) on the H200 raw pages with metric instances in
profiling/fixtures/verify/ (`--set full --section PmSampling --section PmSampling_WarpStates`, exported with
`--page raw --csv --print-metric-instances values`)."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from kwiki.profiling.compare import compare_bytes
from kwiki.profiling.diagnose import diagnose_bytes
from kwiki.profiling.timeline import SPARK, _analyze, parse_timelines

VERIFY = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"


def inst(stem: str) -> bytes:
    return gzip.decompress((VERIFY / f"{stem}.rawinst.csv.gz").read_bytes())


def test_the_partial_last_wave_shows_as_a_tail_and_its_fix_does_not():
    (bad,) = parse_timelines(inst("tail_effect-bad"))
    (fixed,) = parse_timelines(inst("tail_effect-fixed"))
    assert bad.interval_us == 1.5 and bad.activity == "TPC.TriageCompute.sm__cycles_active.avg"
    # 249.6 us at 1.5 us per sample; the lone 265th block runs alone for the last third
    assert 160 <= bad.samples <= 170 and 0.3 < bad.tail_share < 0.36 and "a tail" in bad.evidence[0]
    assert fixed.tail_share < 0.05 and "no tail" in fixed.evidence[0]
    assert bad.sparkline[1:20] == SPARK[-1] * 19 and bad.sparkline.endswith(SPARK[0] * 10)
    names = [s.metric for s in bad.series]
    assert "pmsampling:smsp__warps_issue_stalled_wait.avg" in names and "pmsampling:smsp__warps_issue_stalled_barrier.avg" not in names
    assert all(s.values and s.step_us > 0 for s in bad.series)


def test_healthy_gemm_and_several_launches():
    (gemm,) = parse_timelines(inst("torch-gemm_bf16"))
    assert gemm.samples > 900 and gemm.tail_share < 0.02
    assert all(len(s.values) <= 240 for s in gemm.series) and gemm.series[0].step_us == 6.0  # 4 samples per point
    three = parse_timelines(inst("coalescing-bad"))
    assert [t.launch_id for t in three] == ["0", "1", "2"] and all(t.tail_share < 0.05 for t in three)


def test_diagnosis_carries_the_timeline_and_the_tail_evidence():
    r = diagnose_bytes((VERIFY / "tail_effect-bad.rawinst.csv.gz").read_bytes(), "tail_effect-bad.rawinst.csv.gz")
    d = r.launches[0]
    assert d.top == "tail-effect" and d.timeline is not None and d.key_metrics["grid_size"] == 265  # "265 (265)" read
    ev = d.signals[0].evidence[-1]
    assert ev.metric.startswith("PM sampling") and ev.value == d.timeline.tail_share
    # the timeline is already here: the next capture is the source page, not another timeline
    assert "--import-source yes" in d.next_step.command and "--print-source cuda,sass" in d.next_step.export
    doc = r.model_dump(mode="json")
    assert doc["launches"][0]["timeline"]["series"][0]["values"]
    c = compare_bytes(inst("tail_effect-bad"), "bad", inst("tail_effect-fixed"), "fixed")
    assert c.kernels[0].resolved[0].signal == "tail-effect" and c.after_diagnosis.launches[0].timeline.tail_share < 0.05


def test_too_short_a_kernel_is_flagged():
    (t,) = parse_timelines(inst("coalescing-bad"))[:1]
    assert t.samples > 20 and not t.warnings  # a 136 us kernel: 91 samples
    tail, idle, ev, warnings = _analyze([3000.0] * 12 + [20.0] * 3, 1.5)  # a 22 us kernel
    assert warnings and "too few to show a tail" in warnings[0] and tail == 0.2


def test_plot_writes_a_png(tmp_path):
    from kwiki.profiling.charts import write_timeline_png

    (t,) = parse_timelines(inst("tail_effect-bad"))
    write_timeline_png(t, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_prints_the_sparkline(tmp_path):
    (tmp_path / "t.csv").write_bytes(inst("tail_effect-bad"))
    env = {"HF_HUB_OFFLINE": "1", "KWIKI_INDEX_DIR": str(tmp_path / "noindex"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "kwiki.service.cli", "diagnose", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "t.png")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "timeline (167 samples x 1.5 us" in out.stdout and SPARK[-1] * 20 in out.stdout and "last 33% of the run" in out.stdout
    assert "wrote" in out.stderr and (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"  # matplotlib is a dependency
