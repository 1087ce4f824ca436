"""Source hotspots from Nsight Compute's source page: the lines that stall, why, and what they point to.

Reads ``ncu --import R.ncu-rep --page source --csv --print-source cuda|sass|cuda,sass`` (profiled with
``--set full --import-source yes``, built with ``-lineinfo``). Each block of the export is one function in
one file: ``"File Path"``, ``"Function Name"``, a header row, then source lines (``Line No``) and, with
``cuda,sass``, the SASS instructions under each line. A line's warp-stall samples are ranked; each hotspot
carries its dominant stall reasons and its memory facts (excessive L2 sectors, shared-memory conflicts,
local-memory traffic, atomics), tied to the signals and pattern pages they point to.

Samples ncu puts on a kernel's exit (``EXIT``/``BRA`` waiting in ``drain``) wait for the kernel's stores and
atomics to retire: they are moved to the line of the last memory write before them, and say so.

Samples on the CUDA toolkit's own headers (``__shfl_sync`` in ``sm_30_intrinsics.hpp``, inlined into the kernel) are
on code the user cannot edit: with ``cuda,sass``, each such instruction's samples go to the user line of the
instruction just before it in the same function (the load a shuffle waits on, the loop it sits in), and say so.
"""

from __future__ import annotations

import bisect
import csv
import re
import zlib
from typing import Literal

from pydantic import BaseModel, Field

from kwiki.errors import BadInput

from .ncu_csv import MAX_BYTES, iter_lines
from .signals import load_signals
from .verdict import MIN_PC_SAMPLES

TOP_HOTSPOTS = 5
SAMPLES = "Warp Stall Sampling (All Samples)"
EXCESSIVE_SHARE = 0.2   # UncoalescedGlobalAccess's bar (signals.yaml uncoalesced-global excessive_share)
MIN_NWAY = 2.0          # an N-way of 1 is a conflict-free shared access
STALL_SHARE = 0.2       # a stall reason named for a line holds at least a fifth of its samples
# source-page column suffix -> catalog stall reason, and the signal a dominant one points to
STALL_COLUMNS = {"barrier": "barrier", "branch_resolving": "branch_resolving", "dispatch": "dispatch_stall", "drain": "drain",
                 "imc": "imc_miss", "lg": "lg_throttle", "long_sb": "long_scoreboard", "math": "math_pipe_throttle",
                 "membar": "membar", "mio": "mio_throttle", "misc": "misc", "no_inst": "no_instruction",
                 "not_selected": "not_selected", "selected": "selected", "short_sb": "short_scoreboard", "sleep": "sleeping",
                 "tex": "tex_throttle", "wait": "wait"}
STALL_SIGNAL = {"long_scoreboard": "long-scoreboard", "lg_throttle": "lg-throttle", "mio_throttle": "mio-throttle",
                "short_scoreboard": "short-scoreboard", "barrier": "barrier-stalls", "no_instruction": "instruction-fetch-stalls",
                "membar": "membar-stalls", "math_pipe_throttle": "math-pipe-throttle", "wait": "low-ipc"}
_EXIT_OPS = re.compile(r"^\s*(@!?U?P\w+\s+)?(EXIT|BRA|RET|NOP|BSYNC|WARPSYNC)\b")
_WRITE_OPS = re.compile(r"^\s*(@!?U?P\w+\s+)?(RED|ATOM|ST)[A-Z]*\b")
_ATOMIC_OPS = re.compile(r"^\s*(@!?U?P\w+\s+)?(RED|ATOM)[A-Z]*\b")
MIN_THREADS = 24.0      # warp-divergence's bar (signals.yaml threads_per_inst): fewer active threads per instruction
#: The CUDA toolkit's include folder (/usr/local/cuda[-13.0]/[targets/x86_64-linux/]include/...): code inlined from there
_TOOLKIT = re.compile(r"/cuda[^/]{0,40}/(?:targets/[^/]{1,80}/)?include/")


class Hotspot(BaseModel):
    file: str
    line: int | None = None  # None: a SASS-only export, located by address
    address: str | None = None
    function: str = ""
    code: str = ""
    samples: int
    share: float  # of the function's samples
    stalls: dict[str, float] = Field(default_factory=dict)  # reason -> share of the line's samples (dominant ones)
    facts: list[str] = Field(default_factory=list)
    signals: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    note: str = ""


class HotspotReport(BaseModel):
    view: Literal["cuda", "sass", "cuda,sass"]
    functions: list[str] = Field(default_factory=list)
    total_samples: int = 0
    hotspots: list[Hotspot] = Field(default_factory=list)
    culprit: int | None = None  # index of the first hotspot whose own counters show a pathology (facts), if any
    warnings: list[str] = Field(default_factory=list)


def _plain(data: bytes, limit: int = MAX_BYTES) -> bytes:
    """``data`` gunzipped when it is gzip (at most ``limit`` bytes out: a bomb stops there), else as is."""
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, limit)
    except zlib.error as exc:
        raise BadInput(f"the gzip stream is broken: {exc}") from None


def is_source_page(data: bytes) -> bool:
    """True for a ``--page source --csv`` export (it opens with "File Path" or ncu's no-lineinfo warnings)."""
    head = _plain(data[:65536], 8192).decode("utf-8", "replace").lstrip("\ufeff") if data[:2] == b"\x1f\x8b" else data[:4096].decode("utf-8", "replace").lstrip("\ufeff")
    first = head.lstrip().splitlines()[0] if head.strip() else ""
    return first.startswith('"File Path"') or (first.startswith("==WARNING== No lineinfo") and '"ID"' not in head)


def _num(s: str) -> float:
    try:
        return float(s.replace(",", "")) if s not in ("", "-") else 0.0
    except ValueError:
        return 0.0


class _Line:
    def __init__(self, file: str, function: str, line: int | None, address: str | None, code: str) -> None:
        self.file, self.function, self.line, self.address, self.code = file, function, line, address, code
        self.samples = 0.0
        self.stalls: dict[str, float] = {}
        self.excessive = self.sectors = self.local = self.nway = self.sass_nway = self.inst = self.thread_inst = 0.0
        self.spaces: set[str] = set()
        self.ops: set[str] = set()
        self.sass: list[str] = []
        self.moved_from: list[int | str] = []
        self.instructions: list[tuple[int, float, dict[str, float], str]] = []  # (address, samples, stalls, SASS) with cuda,sass
        self.moved_to: _Line | None = None  # a toolkit header's line: the user line its samples went to

    def add(self, rec: dict[str, str], stall_cols: dict[str, str]) -> None:
        self.samples += _num(rec.get(SAMPLES, ""))
        for col, reason in stall_cols.items():
            self.stalls[reason] = self.stalls.get(reason, 0.0) + _num(rec.get(col, ""))
        self.excessive += _num(rec.get("L2 Theoretical Sectors Global Excessive", ""))
        self.sectors += _num(rec.get("L2 Theoretical Sectors Global", ""))
        self.local += _num(rec.get("L2 Theoretical Sectors Local", ""))
        self.nway = max(self.nway, _num(rec.get("L1 Conflicts Shared N-Way", "")))
        self.inst += _num(rec.get("Instructions Executed", ""))
        self.thread_inst += _num(rec.get("Thread Instructions Executed", ""))
        self.spaces |= {re.sub(r"\(\d+\)", "", x) for x in rec.get("Address Space", "").split(",") if x not in ("", "-")}
        self.ops |= {re.sub(r"\(\d+\)", "", x) for x in rec.get("Access Operation", "").split(",") if x not in ("", "-")}


#: Rows read from a source page (a large kernel has tens of thousands of SASS instructions); reading stops there, with
#: a warning, so a file of millions of short rows costs no more than this many rows of work and memory.
MAX_SOURCE_ROWS = 200_000


def _blocks(text: str) -> tuple[list[tuple[str, str, list[str], list[list[str]]]], bool]:
    """The (file, function, header, rows) blocks of a source page, and whether reading stopped at MAX_SOURCE_ROWS."""
    out: list[tuple[str, str, list[str], list[list[str]]]] = []
    file = function = ""
    header: list[str] | None = None
    for n, row in enumerate(csv.reader(iter_lines(text))):
        if n >= MAX_SOURCE_ROWS:
            return out, True
        if not row:
            continue
        if row[0] in ("File Path", "File Name"):
            file, header = (row[1] if len(row) > 1 else ""), None
        elif row[0] in ("Function Name", "Kernel Name"):  # --print-source sass names the kernel, not a file
            function, header = (row[1] if len(row) > 1 else ""), None
        elif SAMPLES in row:
            header = row
            out.append((file, function, header, []))
        elif header is not None and out:
            out[-1][3].append(row)
    return out, False


def parse_source_page(data: bytes, top: int = TOP_HOTSPOTS) -> HotspotReport:
    """The top source lines (or SASS instructions) of a source-page export by warp-stall samples. Raises BadInput."""
    text = _plain(data).decode("utf-8", "replace").lstrip("\ufeff")
    warnings = [ln.split("==WARNING==", 1)[1].strip() for ln in text.splitlines()[:200] if ln.startswith("==WARNING==")]
    blocks, cut = _blocks(text)
    if cut:
        warnings.append(f"the export has more than {MAX_SOURCE_ROWS} rows; read the first {MAX_SOURCE_ROWS}")
    if not blocks and re.search(r'^"Line No","Source"\s*$', text[:20000], re.M):
        raise BadInput("this source export has the code but no metrics: Nsight Compute 2025.3.1 prints per-line samples only with "
                       "--print-source cuda,sass (or sass)", hint="export with `ncu --import R.ncu-rep --page source --csv --print-source cuda,sass`")
    if not blocks:
        if warnings:
            return HotspotReport(view="sass", warnings=[*warnings[:5], (
                "no source lines in this export: the kernel has no line info (library kernels); rebuild with -lineinfo, profile "
                "with --import-source yes, or export --print-source sass to rank SASS instructions")])
        raise BadInput("not an Nsight Compute source-page export",
                       hint="export with `ncu --import R.ncu-rep --page source --csv --print-source cuda,sass`")
    lines: dict[tuple[str, str, int | None, str | None], _Line] = {}
    order: list[_Line] = []
    views = set()
    for file, function, header, rows in blocks:
        has_line = "Line No" in header
        src_i = header.index("Source") if "Source" in header else None
        addr_i = header.index("Address") if "Address" in header else None
        sass_i = (addr_i + 1) if addr_i is not None and addr_i + 1 < len(header) and header[addr_i + 1] == "Source" else None
        views.add("cuda,sass" if has_line and sass_i is not None else "cuda" if has_line else "sass")
        stall_cols = {c: STALL_COLUMNS[c[6:]] for c in header if c.startswith("stall_") and c[6:] in STALL_COLUMNS}
        current: _Line | None = None
        for row in rows:
            rec = dict(zip(header, row))  # the two "Source" columns collapse; the code text is read by position
            if has_line and row[0].strip():
                ln = int(_num(row[0]))
                key: tuple[str, str, int | None, str | None] = (file, function, ln, None)
                if key not in lines:
                    lines[key] = _Line(file, function, ln, None, row[src_i].strip() if src_i is not None else "")
                    order.append(lines[key])
                current = lines[key]
                current.add(rec, stall_cols)
            elif not has_line and addr_i is not None:
                code = row[src_i].strip() if src_i is not None and src_i < len(row) else ""
                key = (file, function, None, row[addr_i])
                if key not in lines:
                    lines[key] = _Line(file, function, None, row[addr_i], code)
                    order.append(lines[key])
                lines[key].add(rec, stall_cols)
                lines[key].sass.append(code)
            elif current is not None and sass_i is not None and sass_i < len(row):
                current.sass.append(row[sass_i].strip())  # per instruction: the N-way of one access (the line's is a sum)
                current.sass_nway = max(current.sass_nway, _num(rec.get("L1 Conflicts Shared N-Way", "")))
                if addr_i is not None and (address := _address(row[addr_i])) is not None:
                    current.instructions.append((address, _num(rec.get(SAMPLES, "")),
                                                 {r: _num(rec.get(c, "")) for c, r in stall_cols.items()}, row[sass_i].strip()))
    _move_toolkit_samples(order)
    _move_exit_drain(order)
    return _report(order, "cuda,sass" if "cuda,sass" in views else sorted(views)[0], warnings, top)  # type: ignore[arg-type]


def _address(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _move_toolkit_samples(order: list[_Line]) -> None:
    """Each sampled instruction of a toolkit header's line goes to the user line of the nearest instruction before it
    (by address, same function); without one (toolkit code first in the function) the samples stay where ncu put them."""
    user: dict[str, list[tuple[int, _Line]]] = {}
    for ln in order:
        if not _TOOLKIT.search(ln.file):
            user.setdefault(ln.function, []).extend((a, ln) for a, _, _, _ in ln.instructions)
    for function_rows in user.values():
        function_rows.sort(key=lambda x: x[0])
    for ln in order:
        rows = user.get(ln.function, [])
        if not _TOOLKIT.search(ln.file) or not rows or not ln.instructions:
            continue
        keys = [a for a, _ in rows]
        for address, samples, stalls, code in ln.instructions:
            i = bisect.bisect_left(keys, address) - 1
            if i < 0 or samples <= 0:
                continue
            target = ln.moved_to = rows[i][1]
            target.sass.append(code)  # its facts (an atomic, a local access) go with it
            target.samples += samples
            ln.samples -= samples
            for r, v in stalls.items():
                target.stalls[r] = target.stalls.get(r, 0.0) + v
                ln.stalls[r] = ln.stalls.get(r, 0.0) - v
            here = f"{ln.file.rsplit('/', 1)[-1]}:{ln.line}"
            if here not in target.moved_from:
                target.moved_from.append(here)
        ln.samples = max(ln.samples, 0.0)


def _move_exit_drain(order: list[_Line]) -> None:
    """Samples on a line that only exits (EXIT/BRA...) and waits in drain belong to the last write before it.

    One pass, keeping each function's last writing line: searching back from every exit line was quadratic in
    the lines of the export (a source page of 100,000 exit lines)."""
    last_writer: dict[str, _Line] = {}
    for ln in order:
        if any(_WRITE_OPS.search(s) for s in ln.sass):
            last_writer[ln.function] = ln.moved_to or ln  # a toolkit atomic's drain belongs where its samples went
            continue
        if not ln.sass or not all(_EXIT_OPS.match(s) for s in ln.sass if s):
            continue
        drain = ln.stalls.get("drain", 0.0)
        if ln.samples <= 0 or drain < 0.5 * ln.samples:
            continue
        writer = last_writer.get(ln.function)
        if writer is None:
            continue
        writer.samples += ln.samples
        for r, v in ln.stalls.items():
            writer.stalls[r] = writer.stalls.get(r, 0.0) + v
        writer.moved_from.append(ln.line if ln.line is not None else (ln.address or "?"))
        ln.samples = 0.0
        ln.stalls = {}


def _facts(ln: _Line) -> tuple[list[str], list[str]]:
    facts, signals = [], []
    if ln.sectors > 0 and ln.excessive / ln.sectors >= EXCESSIVE_SHARE:
        facts.append(f"L2 Theoretical Sectors Global Excessive {ln.excessive:,.0f} of {ln.sectors:,.0f} ({ln.excessive / ln.sectors:.0%})")
        signals.append("sparse-stores" if ln.ops and ln.ops <= {"Store"} else "uncoalesced-global")
    per_instruction = ln.line is None or bool(ln.sass_nway)  # a SASS row is one instruction; a line's value is a sum
    nway = max(ln.nway, ln.sass_nway) if ln.line is None else (ln.sass_nway if ln.sass else ln.nway)
    if nway >= MIN_NWAY:
        facts.append(f"L1 Conflicts Shared N-Way {nway:g}" + (" (worst instruction)" if per_instruction and ln.line is not None else ""))
        signals.append("smem-bank-conflicts")
    if "Local" in ln.spaces:
        facts.append(f"local memory (register spills or a stack array): {ln.local:,.0f} L2 sectors")
        signals.append("register-spilling")
    atomics = sorted({s.split()[-1] if s.split()[0].startswith("@") else s.split()[0] for s in ln.sass if _ATOMIC_OPS.match(s)})
    if atomics:
        facts.append("global atomic / reduction (" + ", ".join(a.split()[0] for a in atomics) + ")")
        signals.append("atomic-contention")
    if ln.inst > 0 and ln.thread_inst / ln.inst < MIN_THREADS:
        facts.append(f"{ln.thread_inst / ln.inst:.1f} of 32 threads active per instruction")
        signals.append("warp-divergence")
    return facts, signals


def _report(order: list[_Line], view: Literal["cuda", "sass", "cuda,sass"], warnings: list[str], top: int) -> HotspotReport:
    defs = load_signals()
    totals: dict[str, float] = {}
    for ln in order:
        totals[ln.function] = totals.get(ln.function, 0.0) + ln.samples
    total = sum(totals.values())
    spots = []
    for ln in sorted(order, key=lambda x: -x.samples)[:top]:
        if ln.samples <= 0:
            break
        stall_total = sum(v for r, v in ln.stalls.items() if r != "selected") or 1.0
        stalls = {r: round(v / stall_total, 4) for r, v in sorted(ln.stalls.items(), key=lambda x: -x[1])
                  if r != "selected" and v / stall_total >= STALL_SHARE}
        facts, signals = _facts(ln)
        signals += [STALL_SIGNAL[r] for r in stalls if r in STALL_SIGNAL and STALL_SIGNAL[r] not in signals]
        toolkit = [m for m in ln.moved_from if isinstance(m, str) and ":" in m]
        exits = [m for m in ln.moved_from if m not in toolkit]
        note = "; ".join(
            ([f"includes the {len(exits)} exit line(s) {exits} whose warps waited in drain for this line's writes"] if exits else [])
            + ([f"includes the samples of CUDA toolkit code inlined after it ({', '.join(toolkit)})"] if toolkit else []))
        spots.append(Hotspot(file=ln.file, line=ln.line, address=ln.address, function=ln.function, code=ln.code[:300],
                             samples=int(ln.samples), share=round(ln.samples / (totals[ln.function] or 1.0), 4), stalls=stalls,
                             facts=facts, signals=signals, patterns=list(dict.fromkeys(p for s in signals for p in defs[s].patterns)), note=note))
    if total < MIN_PC_SAMPLES:
        warnings.append(f"{total:.0f} warp-stall samples in all: too few to rank lines reliably (fewer than {MIN_PC_SAMPLES}); "
                        "profile a longer launch or several")
    culprit = next((i for i, h in enumerate(spots) if h.facts), None)
    return HotspotReport(view=view, functions=list(totals), total_samples=int(total), hotspots=spots, culprit=culprit, warnings=warnings)
