"""Read Nsight Compute rule messages (the details page's ``Rule Description``) as evidence.

Two uses:

* :func:`derive_metrics` turns numbers stated in rule text into metric values the rules can use when
  the export has no raw counters (details page only): the stall share of a ``CPIStall`` message
  ("This stall type represents about 51.3% of the total average ..."), the partial wave of a
  ``LaunchConfiguration`` message, grid and SM count of the small-grid message. (Bytes per sector are
  left to :func:`message_hits`: without sector counts the traffic share is unknown, and ncu's own
  estimated speedup already weighs it.)
* :func:`message_hits` maps a message to signals with ncu's own estimated speedup as magnitude; the
  rule engine uses these only for signals its metric rules could not evaluate.

    >>> derive_metrics([{"name": "CPIStall", "description": "... waiting for sibling warps at a CTA barrier. "
    ...                  "This stall type represents about 51.3% of the total average of 25.0 cycles"}])
    {'stall_barrier_share': 0.513}
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

#: phrase in a CPIStall description -> stall reason
STALL_PHRASES: list[tuple[re.Pattern[str], str]] = [(re.compile(p, re.I), r) for p, r in [
    (r"scoreboard dependency on a? ?L1TEX", "long_scoreboard"),
    (r"scoreboard dependency on a? ?MIO", "short_scoreboard"),
    (r"MIO \(memory input/output\) instruction queue", "mio_throttle"),
    (r"local and global \(LG\) memory operations", "lg_throttle"),
    (r"instruction queue for texture", "tex_throttle"),
    (r"sibling warps at a CTA barrier", "barrier"),
    (r"after EXIT waiting for all outstanding memory", "drain"),
    (r"memory barrier", "membar"),
    (r"execution pipe to be available", "math_pipe_throttle"),
    (r"fixed latency execution dependency", "wait"),
    (r"instruction cache miss|to fetch an instruction", "no_instruction"),
    (r"branch target to be computed", "branch_resolving"),
    (r"immediate constant cache", "imc_miss"),
    (r"dispatcher|dispatch stall", "dispatch_stall"),
    (r"waiting for a (?:nanosleep|sleep)|warp was sleeping", "sleeping"),
    (r"warpgroup", "warpgroup_arrive"),
]]
# Repeats are bounded ({1,12} digits, {0,300} characters): rule texts come from uploads, and `([\d.]+) ?- ?way` rescanned
# a 4,000-digit run from every digit in it (quadratic), once per rule and launch. A number is digits with at most
# one point, so float() never sees "1.2.3".
_SHARE = re.compile(r"represents about (\d{1,12}(?:\.\d{1,8})?)% of the total average", re.I)
_BYTES = re.compile(r"global (loads|stores)[^.]{0,300}?\. On average, only (\d{1,12}(?:\.\d{1,8})?) of the 32 bytes", re.I)
_LOCAL_BYTES = re.compile(r"local (loads|stores)[^.]{0,300}?\. On average, only (\d{1,12}(?:\.\d{1,8})?) of the 32 bytes", re.I)
_WAVES = re.compile(r"(\d{1,12}) full waves? and a partial wave of (\d{1,12}) thread blocks", re.I)
_UPTO = re.compile(r"partial wave may account for up to (\d{1,12}(?:\.\d{1,8})?)%", re.I)
_SMALL = re.compile(r"execute only (\d{1,12}) blocks, which is less than the GPU's (\d{1,12}) multiprocessors", re.I)
_TOO_SMALL = re.compile(r"grid is too small to fill the available resources", re.I)
_EXCESS = re.compile(r"uncoalesced global accesses resulting in a total of [\d,]{1,30} excessive sectors \((\d{1,12}(?:\.\d{1,8})?)% of the total", re.I)
_SHARED_EXCESS = re.compile(r"uncoalesced shared accesses resulting in a total of [\d,]{1,30} excessive wavefronts \((\d{1,12}(?:\.\d{1,8})?)% of the total", re.I)
_NWAY = re.compile(r"(\d{1,12}(?:\.\d{1,8})?) ?- ?way bank conflict", re.I)
_OCC_LIMIT = [(re.compile(p, re.I), s) for p, s in [
    (r"limited by the number of required registers", "occupancy-registers"),
    (r"limited by the required amount of shared memory", "occupancy-shared-memory"),
    (r"limited by the number of (?:blocks|warps)", "occupancy-block-size"),
]]
_THREADS = re.compile(r"average of (\d{1,12}(?:\.\d{1,8})?) threads being active per cycle", re.I)
_IMBALANCE = re.compile(r"One or more SMs have a much (?:higher|lower) number of active cycles", re.I)
_PIPE = re.compile(r"(FMA|FP32|ALU|Tensor|FP64)[^.]{0,40}is the highest-utilized pipeline \((\d{1,12}(?:\.\d{1,8})?)%\)", re.I)


def _get(rule: Any, key: str) -> Any:
    if isinstance(rule, Mapping):
        return rule.get(key)
    return getattr(rule, key, None)


def stall_reason_of(text: str) -> str | None:
    """The stall reason a CPIStall-style sentence talks about, if any."""
    for pat, reason in STALL_PHRASES:
        if pat.search(text):
            return reason
    return None


def derive_metrics(rules: Iterable[Any]) -> dict[str, float]:
    """Metric values stated in rule text (keys are catalog ids or ``stall_<reason>_share``)."""
    out: dict[str, float] = {}
    for rule in rules:
        text = str(_get(rule, "description") or "")[:4000]
        if not text:
            continue
        m = _SHARE.search(text)
        if m:
            reason = stall_reason_of(text)
            if reason:
                out.setdefault(f"stall_{reason}_share", min(1.0, float(m.group(1)) / 100.0))
        m = _WAVES.search(text)
        if m:
            out["msg_full_waves"] = float(m.group(1))
            out["msg_partial_blocks"] = float(m.group(2))
        m = _SMALL.search(text)
        if m:
            out.setdefault("grid_size", float(m.group(1)))
            out.setdefault("sm_count", float(m.group(2)))
        m = _THREADS.search(text)
        if m:
            out.setdefault("threads_per_inst", float(m.group(1)))
    return out


def message_hits(rules: Iterable[Any]) -> list[dict[str, Any]]:
    """``[{signal, magnitude, rule, text}]`` for messages that name a signal (magnitude from ncu's estimate)."""
    hits: list[dict[str, Any]] = []
    rules = list(rules)
    kinds = {m.group(1).lower() for r in rules for m in _BYTES.finditer(str(_get(r, "description") or "")[:4000])}
    excess_signal = "sparse-stores" if kinds == {"stores"} else "uncoalesced-global"
    for rule in rules:
        text = str(_get(rule, "description") or "")[:4000]
        name = str(_get(rule, "name") or "")
        if not text or str(_get(rule, "type") or "").upper() == "INF" and not _TOO_SMALL.search(text):
            continue
        sp = _get(rule, "speedup")
        est = max(0.0, min(1.0, float(sp) / 100.0)) if isinstance(sp, (int, float)) else None
        if str(_get(rule, "speedup_type") or "").lower() == "local" and est is not None:
            est *= 0.5  # a local estimate is relative to one unit, not the kernel

        def add(signal: str, mag: float | None, quote: str) -> None:
            hits.append({"signal": signal, "magnitude": round(max(0.0, min(1.0, mag if mag is not None else 0.3)), 4),
                         "rule": name, "text": quote[:300]})

        if m := _SMALL.search(text) or _TOO_SMALL.search(text):
            small = _SMALL.search(text)
            add("small-grid", 1 - float(small.group(1)) / float(small.group(2)) if small and float(small.group(2)) > 0 else est, m.group(0))
        if m := _WAVES.search(text) or _UPTO.search(text):
            up = _UPTO.search(text)
            add("tail-effect", est if est is not None else (float(up.group(1)) / 100 if up else None), m.group(0))
        if m := _EXCESS.search(text):
            add(excess_signal, est if est is not None else float(m.group(1)) / 100, m.group(0))
        for m in _BYTES.finditer(text):
            if float(m.group(2)) < 16:
                add("uncoalesced-global" if m.group(1).lower() == "loads" else "sparse-stores", est, m.group(0))
        if _LOCAL_BYTES.search(text) or re.search(r"local memory|spill", text, re.I) and name == "MemoryCacheAccessPattern":
            add("register-spilling", est, "local memory access pattern")
        if (m := _SHARED_EXCESS.search(text)) or (m := _NWAY.search(text)):
            add("smem-bank-conflicts", est, m.group(0))
        for pat, sig in _OCC_LIMIT:
            if m := pat.search(text):
                add(sig, est, m.group(0))
        if name == "ThreadDivergence" or _THREADS.search(text):
            add("warp-divergence", est, m.group(0) if (m := _THREADS.search(text)) else text.split("\n", 1)[0][:80])
        if m := _IMBALANCE.search(text):
            add("load-imbalance", est * 0.5 if est is not None else None, m.group(0))
        if (m := _PIPE.search(text)) and float(m.group(2)) >= 70:
            sig = "tensor-pipe-bound" if m.group(1).lower() == "tensor" else "fma-bound"
            add(sig, 0.6 * float(m.group(2)) / 100, m.group(0))
    return hits
