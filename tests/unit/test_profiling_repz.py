"""`.ncu-repz` (issue 16 point 6): profiling/fixtures/verify/tail_effect-bad.ncu-repz is the real H200 report
tail_effect-bad.ncu-rep compressed with `zstd -19` (Nsight Compute 2025.3.1 itself writes only .ncu-rep)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kwiki.errors import BadInput
from kwiki.profiling import repz
from kwiki.profiling.diagnose import diagnose_bytes
from kwiki.profiling.ncu_csv import REPORT_MAGIC, ncu_report_module

REPZ = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify" / "tail_effect-bad.ncu-repz"
HAVE_ZSTD = shutil.which("zstd") is not None


@pytest.mark.skipif(not HAVE_ZSTD, reason="needs the zstd command (or the zstandard module) to decompress")
def test_repz_unwraps_to_the_report_and_reaches_the_report_reader():
    data, name = repz.unwrap(REPZ.read_bytes(), REPZ.name)
    assert data[:4] == REPORT_MAGIC and len(data) == 1_357_591 and name == "tail_effect-bad.ncu-rep"
    if ncu_report_module() is None:
        with pytest.raises(BadInput) as e:
            diagnose_bytes(REPZ.read_bytes(), REPZ.name)
        assert "ncu_report module is not installed" in e.value.message  # decompressed, then read as a report
    else:
        assert diagnose_bytes(REPZ.read_bytes(), REPZ.name).launches[0].top == "tail-effect"


@pytest.mark.skipif(not HAVE_ZSTD, reason="needs the zstd command")
def test_repz_output_is_capped_and_corruption_is_reported():
    with pytest.raises(BadInput, match="over the 100000-byte limit"):
        repz.unwrap(REPZ.read_bytes(), REPZ.name, max_bytes=100_000)
    broken = REPZ.read_bytes()[:5000]
    with pytest.raises(BadInput, match="corrupt .ncu-repz"):
        repz.unwrap(broken, "x.ncu-repz")


def test_a_repz_name_without_zstd_content_and_no_decoder(monkeypatch):
    with pytest.raises(BadInput, match="not zstd-compressed"):
        repz.unwrap(b"NVR\x00....", "x.ncu-repz")
    monkeypatch.setattr(repz.shutil, "which", lambda _: None)
    monkeypatch.setitem(__import__("sys").modules, "zstandard", None)
    with pytest.raises(BadInput) as e:
        repz.unwrap(REPZ.read_bytes(), REPZ.name)
    assert "zstd -d" in e.value.hint
