"""Recognize Nsight Compute vocabulary in free text and map it to NCU signals.

``route(text)`` finds stall-reason words, raw metric names (through the catalog), pasted ncu rule
messages and the phrases of ``signals.yaml``; it returns the signals, best first, each with the
pattern pages and symptom tags the search engine boosts and the words it may add to its keyword query
(plain lower-case words: profiling imports nothing from the index, which analyzes them itself).
Ordinary questions return ``[]`` (or only low-confidence guesses). Everything is precompiled at
import; a call takes well under a millisecond for a normal query.

    >>> from kwiki.profiling.routing import route
    >>> route("my kernel is dominated by stall_long_scoreboard")[0]["signal"]
    'long-scoreboard'
    >>> route("how do I use TMA multicast")
    []
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .catalog import load_catalog
from .messages import message_hits, stall_reason_of
from .signals import load_signals

MAX_CHARS = 4000
MIN_CONFIDENCE = 0.3
MAX_RESULTS = 5
#: Words of a signal's name and first two phrases that a search adds to its keyword query (``expand``); the
#: index analyzes them with its own analyzer and keeps the first MAX_EXPAND terms.
MAX_EXPAND = 5

#: stall reason -> (signal, confidence)
STALL_SIGNAL: dict[str, tuple[str, float]] = {
    "long_scoreboard": ("long-scoreboard", 0.85), "short_scoreboard": ("short-scoreboard", 0.85),
    "mio_throttle": ("mio-throttle", 0.85), "lg_throttle": ("lg-throttle", 0.85), "tex_throttle": ("lg-throttle", 0.6),
    "barrier": ("barrier-stalls", 0.85), "membar": ("membar-stalls", 0.85), "math_pipe_throttle": ("math-pipe-throttle", 0.85),
    "no_instruction": ("instruction-fetch-stalls", 0.8), "no_instructions": ("instruction-fetch-stalls", 0.8),
    "imc_miss": ("instruction-fetch-stalls", 0.6), "branch_resolving": ("warp-divergence", 0.5),
    "wait": ("low-ipc", 0.6), "dispatch_stall": ("low-ipc", 0.5), "drain": ("sparse-stores", 0.5),
    "gmma": ("tensor-pipe-underused", 0.7), "warpgroup_arrive": ("tensor-pipe-underused", 0.7),
    "sleeping": ("barrier-stalls", 0.4), "not_selected": ("fma-bound", 0.4), "misc": ("low-ipc", 0.3),
}
_REASONS = "|".join(sorted((r.replace("_", "[_ ]") for r in STALL_SIGNAL), key=len, reverse=True))
_STALL_RE = re.compile(rf"\b(?:stall(?:ed)?s?[_ ](?:on[_ ])?|warps?_issue_stalled_|stall_)({_REASONS})\b|\b({_REASONS})[_ ]stalls?\b")
_SB_RE = re.compile(r"\bstall_(long|short)_sb\b")
_METRIC_RE = re.compile(r"\b[a-z][a-z0-9]*__[a-z0-9_]+(?:\.[a-z0-9_]+)*")
_SMS_BUSY = re.compile(r"\bonly \d+ (?:of|out of) (?:my |the |all |our )?\d+ sms?\b(?P<rest>.{0,60})")
_MESSAGE_HINT = re.compile(r"stall type represents|partial wave|bytes transmitted per sector|excessive (?:sectors|wavefronts)|"
                           r"way bank conflict|theoretical occupancy|threads being active|which is less than the gpu|grid is too small|"
                           r"highest-utilized pipeline|much (?:higher|lower) number of active cycles", re.I)
_GENERIC = {"atomics", "divergence", "thrashing", "spills", "coalescing", "aos", "memory bound", "memory-bound", "compute bound",
            "compute-bound", "latency bound", "latency-bound", "memory bandwidth", "local memory", "registers per thread",
            "cache misses", "evicted", "cuda graphs", "register pressure", "same address", "straggler", "unbalanced"}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"not", "a", "an", "the", "of", "on", "to", "is", "are", "too", "per", "by", "and", "or", "in", "at", "for", "with", "s"}


@lru_cache(maxsize=1)
def _tables() -> dict[str, Any]:
    sigs = load_signals()
    phrase_sig: dict[str, list[str]] = {}
    for s in sigs.values():
        for p in s.phrases:
            phrase_sig.setdefault(p.lower(), []).append(s.id)
    alts = sorted(phrase_sig, key=len, reverse=True)
    phrase_re = re.compile(r"(?<![a-z0-9_])(" + "|".join(re.escape(p) for p in alts) + r")(?![a-z0-9_])")
    expand: dict[str, list[str]] = {}
    for s in sigs.values():
        words = [w for w in _WORD.findall(f"{s.id.replace('-', ' ')} {' '.join(s.phrases[:2])}".lower()) if w not in _STOP]
        expand[s.id] = list(dict.fromkeys(words))
    cat = load_catalog()
    metric_sig: dict[str, list[str]] = {}
    for name, cid in cat.names_for_routing().items():
        m = cat.get(cid)
        if m is not None and m.feeds:
            metric_sig[name] = m.feeds
    return {"sigs": sigs, "phrase_sig": phrase_sig, "phrase_re": phrase_re, "expand": expand, "metric_sig": metric_sig, "catalog": cat}


def _phrase_conf(phrase: str) -> float:
    if phrase in _GENERIC:
        return 0.35
    return 0.8 if (" " in phrase or "_" in phrase or "-" in phrase) else 0.55


def route(text: str) -> list[dict[str, Any]]:
    """Signals named or implied by ``text``, best first (``[]`` when none)."""
    if not isinstance(text, str) or not text.strip():
        return []
    t = _tables()
    raw = text[:MAX_CHARS]
    low = raw.lower()
    hits: dict[str, list[tuple[float, str]]] = {}

    def add(sig: str, conf: float, matched: str) -> None:
        if sig in t["sigs"]:
            hits.setdefault(sig, []).append((conf, matched[:200]))

    for m in t["phrase_re"].finditer(low):
        for sig in t["phrase_sig"][m.group(1)]:
            add(sig, _phrase_conf(m.group(1)), raw[m.start():m.end()])
    for m in _STALL_RE.finditer(low):
        reason = (m.group(1) or m.group(2)).replace(" ", "_")
        sig, conf = STALL_SIGNAL.get(reason, (None, 0.0))
        if sig:
            add(sig, conf, raw[m.start():m.end()])
    for m in _SB_RE.finditer(low):
        add("long-scoreboard" if m.group(1) == "long" else "short-scoreboard", 0.85, raw[m.start():m.end()])
    for m in _SMS_BUSY.finditer(low):
        late = re.search(r"\b(end|last|tail|final|finish|remaining|closing|straggl)", m.group("rest"))
        add("tail-effect" if late else "small-grid", 0.8 if late else 0.7, raw[m.start():m.end()].strip())
    if "__" in low:
        for m in _METRIC_RE.finditer(low):
            name = m.group(0).rstrip(".")
            feeds = t["metric_sig"].get(name)
            if feeds is None:
                cid = t["catalog"].resolve(name)
                metric = t["catalog"].get(cid) if cid else None
                feeds = metric.feeds if metric else []
                reason = re.search(r"stalled_([a-z_]+?)(?:_per_|_not_issued|\.|$)", name)
                if reason and reason.group(1) in STALL_SIGNAL:
                    feeds = [STALL_SIGNAL[reason.group(1)][0], *feeds]
            for i, sig in enumerate(feeds[:3]):
                add(sig, 0.65 if i == 0 else 0.35, raw[m.start():m.end()])
    if _MESSAGE_HINT.search(low):
        for h in message_hits([{"name": "", "description": raw}]):
            add(h["signal"], 0.9, h["text"])
    if "stalled" in low or "stall type" in low:
        reason = stall_reason_of(raw)
        if reason in STALL_SIGNAL:
            sig, conf = STALL_SIGNAL[reason]
            add(sig, min(0.9, conf + 0.05), f"ncu CPIStall message: {reason}")
    out: list[dict[str, Any]] = []
    for sig, found in hits.items():
        miss = 1.0
        for conf, _ in found:
            miss *= 1 - conf
        conf = round(min(0.99, 1 - miss), 3)
        if conf < MIN_CONFIDENCE:
            continue
        s = t["sigs"][sig]
        best = max(found, key=lambda x: x[0])
        out.append({"signal": sig, "confidence": conf, "matched": best[1], "patterns": list(s.patterns),
                    "symptoms": list(s.symptoms), "expand": list(t["expand"][sig])})
    out.sort(key=lambda d: (-d["confidence"], d["signal"]))
    return out[:MAX_RESULTS]
