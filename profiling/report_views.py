"""Timelines and source hotspots read straight from an ``.ncu-rep`` when ``ncu_report`` is installed.

The same views :mod:`.timeline` and :mod:`.hotspots` build from CSV exports, from the report itself:

* PM sampling: the metrics named ``pmsampling:*`` and ``*.TriageCompute.*`` hold one instance per sample
  (their correlation ids are the sample timestamps); ``profiler__pmsampler_interval_time`` is the interval.
* source: the per-PC metrics (``smsp__pcsamp_sample_count``, ``smsp__pcsamp_warps_issue_stalled_<reason>``,
  ``memory_l2_theoretical_sectors_global[_excessive]``, ``memory_l2_theoretical_sectors_local``,
  ``derived__memory_l1_conflicts_shared_nway``, ``inst_executed``, ``thread_inst_executed``) carry the PC of each
  instance as its correlation id; ``IAction.source_info(pc)`` gives the file and line, ``sass_by_pc(pc)`` the
  instruction. API as Nsight Compute 2025.3.1's ``extras/python/ncu_report.py`` has it.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from .hotspots import TOP_HOTSPOTS, HotspotReport, _Line, _move_exit_drain, _report
from .ncu_csv import ncu_report_module
from .timeline import Timeline, build_timeline

_PC_FACTS = {"memory_l2_theoretical_sectors_global_excessive": "excessive", "derived__memory_l2_theoretical_sectors_global_excessive": "excessive",
             "memory_l2_theoretical_sectors_global": "sectors", "memory_l2_theoretical_sectors_local": "local",
             "inst_executed": "inst", "thread_inst_executed": "thread_inst"}
_NWAY = "derived__memory_l1_conflicts_shared_nway"
_STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
_TIME_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def _instances(m: Any) -> list[tuple[int, float]]:
    """(correlation id, value) per instance of an instanced metric; [] when it has none."""
    try:
        n = m.num_instances()
    except Exception:
        return []
    if not n:
        return []
    corr = m.correlation_ids() if m.has_correlation_ids() else None
    out = []
    for i in range(n):
        try:
            out.append((int(corr.as_uint64(i)) if corr is not None else i, float(m.as_double(i))))
        except Exception:
            continue
    return out


def _interval_us(act: Any, names: set[str]) -> float:
    if "profiler__pmsampler_interval_time" not in names:
        return 0.0
    m = act.metric_by_name("profiler__pmsampler_interval_time")
    inst = _instances(m)
    v = inst[0][1] if inst else float(m.as_double())
    return v * _TIME_TO_US.get(str(m.unit()).lower(), 1.0)


def _timeline(act: Any, names: set[str], launch_id: str, kernel: str) -> Timeline | None:
    series = {n: [v for _, v in _instances(act.metric_by_name(n))] for n in names if n.startswith("pmsampling:") or ".TriageCompute." in n}
    return build_timeline({k: v for k, v in series.items() if len(v) > 1}, _interval_us(act, names), launch_id, kernel)


def _hotspot_lines(act: Any, names: set[str], kernel: str) -> list[_Line]:
    from .hotspots import STALL_COLUMNS

    reasons = {c: r for c, r in STALL_COLUMNS.items()}
    by_pc: dict[int, _Line] = {}

    def line(pc: int) -> _Line:
        if pc not in by_pc:
            file, ln = "", None
            try:
                info = act.source_info(pc)
                if info is not None:
                    file, ln = str(info.file_name()), int(info.line())
            except Exception:
                pass
            try:
                sass = str(act.sass_by_pc(pc))
            except Exception:
                sass = ""
            by_pc[pc] = _Line(file, kernel, ln, hex(pc), sass)
            by_pc[pc].sass.append(sass)
        return by_pc[pc]

    for pc, v in _instances(act.metric_by_name("smsp__pcsamp_sample_count")) if "smsp__pcsamp_sample_count" in names else []:
        line(pc).samples += v
    for n in names:
        if n.startswith(_STALL_PREFIX) and not n.endswith("_not_issued"):
            reason = n[len(_STALL_PREFIX):]
            reason = {"no_instructions": "no_instruction"}.get(reason, reason)
            if reason not in reasons.values():
                continue
            for pc, v in _instances(act.metric_by_name(n)):
                ln = line(pc)
                ln.stalls[reason] = ln.stalls.get(reason, 0.0) + v
        elif n in _PC_FACTS:
            attr = _PC_FACTS[n]
            for pc, v in _instances(act.metric_by_name(n)):
                setattr(line(pc), attr, getattr(line(pc), attr) + v)
        elif n == _NWAY:
            for pc, v in _instances(act.metric_by_name(n)):
                line(pc).sass_nway = max(line(pc).sass_nway, v)
    text = _source_text(act)
    # fold instructions into their source lines where the report has line info
    merged: dict[tuple[str, int], _Line] = {}
    out: list[_Line] = []
    for pc in sorted(by_pc):
        ins = by_pc[pc]
        if ins.line is None:
            out.append(ins)
            continue
        key = (ins.file, ins.line)
        if key not in merged:
            src = text.get(ins.file, [])
            merged[key] = _Line(ins.file, kernel, ins.line, None, src[ins.line - 1].strip() if 0 < ins.line <= len(src) else "")
            out.append(merged[key])
        tgt = merged[key]
        tgt.samples += ins.samples
        for r, v in ins.stalls.items():
            tgt.stalls[r] = tgt.stalls.get(r, 0.0) + v
        for attr in ("excessive", "sectors", "local", "inst", "thread_inst"):
            setattr(tgt, attr, getattr(tgt, attr) + getattr(ins, attr))
        tgt.sass_nway = max(tgt.sass_nway, ins.sass_nway)
        tgt.sass += ins.sass
        if ins.local > 0:
            tgt.spaces.add("Local")
    for ins in out:
        if ins.line is None and ins.local > 0:
            ins.spaces.add("Local")
    return out


def _source_text(act: Any) -> dict[str, list[str]]:
    """{file: its lines} for the source imported into the report (``--import-source yes``); {} when there is none."""
    try:
        files = act.source_files()
        return {str(k): str(files[k]).splitlines() for k in list(files.keys())}
    except Exception:  # no imported source, or a module without the call
        return {}


def report_views(data: bytes, top: int = TOP_HOTSPOTS) -> tuple[dict[str, Timeline], HotspotReport | None]:
    """``({launch id: timeline}, hotspots of the first launch)`` from report bytes; ``({}, None)`` without ncu_report."""
    ncu_report = ncu_report_module()
    if ncu_report is None:
        return {}, None
    fd, path = tempfile.mkstemp(suffix=".ncu-rep")
    timelines: dict[str, Timeline] = {}
    hotspots: HotspotReport | None = None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            ctx = ncu_report.load_report(path)
        except Exception:
            return {}, None
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for i in range(rng.num_actions()):
                act = rng.action_by_idx(i)
                lid = str(i) if ctx.num_ranges() == 1 else f"{r}:{i}"
                names = set(act.metric_names())
                kernel = str(act.name())
                t = _timeline(act, names, lid, kernel)
                if t is not None:
                    timelines[lid] = t
                if hotspots is None:
                    lines = _hotspot_lines(act, names, kernel)
                    if any(ln.samples > 0 for ln in lines):
                        _move_exit_drain(lines)
                        view = "cuda,sass" if any(ln.line is not None for ln in lines) else "sass"
                        hotspots = _report(lines, view, [], top)  # type: ignore[arg-type]
    finally:
        os.unlink(path)
    return timelines, hotspots
