"""Parse Nsight Compute exports into one :class:`LaunchProfile` per profiled kernel launch.

Accepted inputs (see :func:`parse_bytes`):

* ``ncu --import X.ncu-rep --page raw --csv``: a header of metric names, a units row, one row per launch;
* ``ncu --import X.ncu-rep --page details --csv`` and plain ``ncu --csv``: long format, one row per
  section metric (``Section Name``, ``Metric Name``, ``Metric Unit``, ``Metric Value``) plus rule rows
  (``Rule Name``, ``Rule Type``, ``Rule Description``, ``Estimated Speedup Type``, ``Estimated Speedup``);
* a JSON object ``{metric name: value}`` (or ``{"metrics": {...}, "kernel": ...}``, or a list of those);
* a ``.ncu-rep`` file when the ``ncu_report`` module is importable (optionally gzip-compressed).

Values are normalized: time to nanoseconds, sizes to bytes, rates to per second, frequencies to Hz;
percentages stay 0-100; thousands separators ("65,536") are removed; "n/a", "no data", "nan" are dropped.

    >>> from kwiki.profiling.ncu_csv import parse_bytes
    >>> res = parse_bytes(open("tests/data/ncu/coalescing-bad.raw.csv", "rb").read(), "x.raw.csv")  # doctest: +SKIP
    >>> res.profiles[0].metrics["duration"]                                                          # doctest: +SKIP
    135168.0
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import math
import re
import zlib
from typing import Any, Iterable, Iterator, Literal

from pydantic import BaseModel, Field

from kwiki.errors import BadInput

from .catalog import Catalog, load_catalog
from .inputs import parse_number, unit_factor

MAX_BYTES = 64 * 1024 * 1024
#: Launches read from one export. A diagnosis reports every launch it reads, so the cap bounds the work and the
#: answer whatever the upload holds (one raw row is one launch; reading stops at the cap, with a warning).
MAX_LAUNCHES = 1000
#: Rule rows kept per launch (ncu writes 10-20); more only repeat and grow the answer.
MAX_RULES_PER_LAUNCH = 100
#: Warnings kept per parse: a file of a million short rows gets one counted line, not a million strings.
MAX_WARNINGS = 20
#: Bytes decompressed at a time from a gzip upload.
GZIP_PIECE = 1024 * 1024
#: Lines searched for the CSV header (ncu prints ==PROF== lines and program output before it).
HEADER_SEARCH_LINES = 5000
REPORT_MAGIC = b"NVR\x00"  # first bytes of an .ncu-rep file
EXPORT_HINT = "export CSV with `ncu --import X.ncu-rep --page raw --csv > X.csv` (or --page details) and upload that"
_ID_COLS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "Kernel Time")

csv.field_size_limit(16 * 1024 * 1024)


class RuleResult(BaseModel):
    """One rule row of the details page ("TailEffect", "CPIStall", ...)."""

    section: str = ""
    name: str
    type: str = ""
    description: str = ""
    speedup_type: str = ""
    speedup: float | None = None


class LaunchProfile(BaseModel):
    """Metrics of one kernel launch, keyed by canonical catalog id."""

    kernel: str = "kernel"
    launch_id: str = "0"
    device: str = ""
    cc: str = ""
    grid: str = ""
    block: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    names: dict[str, str] = Field(default_factory=dict, description="canonical id -> name it was read from")
    rules: list[RuleResult] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list, description="metric names not in the catalog (first 50)")
    unknown_count: int = 0

    @property
    def name(self) -> str:
        return f"{self.kernel} (launch {self.launch_id})"


class ParseResult(BaseModel):
    format: Literal["raw", "details", "json", "ncu-rep"]
    profiles: list[LaunchProfile]
    warnings: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------ entry point
def parse_bytes(data: bytes, filename: str = "", catalog: Catalog | None = None, max_bytes: int = MAX_BYTES) -> ParseResult:
    """Parse an upload; raises :class:`BadInput` for anything that is not a usable ncu export."""
    if not isinstance(data, (bytes, bytearray)):
        raise BadInput("expected the file's bytes")
    if len(data) > max_bytes:
        raise BadInput(f"file is {len(data)} bytes, over the {max_bytes}-byte limit", hint="profile fewer launches (-c 1) or export --page raw")
    cat = catalog or load_catalog()
    name = (filename or "").lower()
    if data[:2] == b"\x1f\x8b":
        try:
            buf = bytearray()
            with gzip.GzipFile(fileobj=io.BytesIO(bytes(data))) as gz:
                # in pieces: read(max_bytes + 1) allocates the whole limit up front, however small the file
                while len(buf) <= max_bytes and (piece := gz.read(GZIP_PIECE)):
                    buf += piece
            data = bytes(buf)
            del buf
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError; a bad deflate stream is zlib.error
            raise BadInput(f"corrupt gzip file: {exc}") from None
        if len(data) > max_bytes:
            raise BadInput("decompressed file is over the size limit")
        name = name.removesuffix(".gz")
    if name.endswith(".ncu-rep") or bytes(data[:4]) == REPORT_MAGIC:
        return _parse_report(bytes(data), cat)
    text = bytes(data).decode("utf-8-sig", errors="replace")
    if "\x00" in text:
        raise BadInput("binary file: not an Nsight Compute CSV or JSON export", hint=EXPORT_HINT)
    stripped = text.lstrip()
    if not stripped:
        raise BadInput("empty file", hint=EXPORT_HINT)
    if stripped[0] in "{[":
        return parse_json_text(stripped, cat)
    return parse_csv_text(text, cat)


# ------------------------------------------------------------------ CSV
def is_header_line(line: str) -> bool:
    """Whether ``line`` is the header row of an ncu CSV export (it starts with the ``ID`` column)."""
    s = line.lstrip("\ufeff").strip()
    return s.startswith('"ID"') or s.startswith("ID,")


def find_header(text: str) -> Iterator[str] | None:
    """The lines of ``text`` from the CSV header on (read lazily), or None when the first
    :data:`HEADER_SEARCH_LINES` lines hold no header. Linear in the text, never a list of all its lines."""
    lines = iter_lines(text)
    for line in itertools.islice(lines, HEADER_SEARCH_LINES):
        if is_header_line(line):
            return itertools.chain([line], lines)
    return None


def iter_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` with their ends, one at a time, without a copy of the whole text
    (``io.StringIO`` holds 4 bytes a character: 26 MB for a 6.6 MB export of which 1,000 rows are read)."""
    pos, n = 0, len(text)
    while pos < n:
        end = text.find("\n", pos)
        end = n if end < 0 else end + 1
        yield text[pos:end]
        pos = end


def _rows(lines: Iterator[str]) -> Iterator[list[str]]:
    try:
        for row in csv.reader(lines):
            if row:
                yield row
    except csv.Error as exc:
        raise BadInput(f"malformed CSV: {exc}", hint=EXPORT_HINT) from None


def parse_csv_text(text: str, catalog: Catalog | None = None) -> ParseResult:
    """Parse raw-page or details-page CSV text (leading ``==PROF==`` or program output is skipped).

    Rows are read one at a time and reading stops at :data:`MAX_LAUNCHES` launches, so the memory and time a
    parse takes are bounded by the cap, not by how many rows the file holds."""
    cat = catalog or load_catalog()
    lines = find_header(text)
    if lines is None:
        raise BadInput("not an Nsight Compute CSV export: no header row starting with \"ID\"", hint=EXPORT_HINT)
    rows = _rows(lines)
    header = [h.strip() for h in next(rows)]
    if "Metric Name" in header and "Metric Value" in header:
        return _parse_details(header, rows, cat)
    if sum("__" in h for h in header) == 0:
        raise BadInput("CSV has an ID column but no Nsight Compute metric columns", hint=EXPORT_HINT)
    return _parse_raw(header, rows, cat)


def _meta(profile: LaunchProfile, rec: dict[str, str]) -> None:
    profile.kernel = (rec.get("Kernel Name") or profile.kernel).strip()[:500] or "kernel"
    profile.launch_id = (rec.get("ID") or profile.launch_id).strip()[:50] or "0"
    profile.device = (rec.get("Device") or "").strip()[:100]
    profile.cc = (rec.get("CC") or "").strip()[:20]
    profile.grid = (rec.get("Grid Size") or "").strip()[:60]
    profile.block = (rec.get("Block Size") or "").strip()[:60]


def _put(profile: LaunchProfile, cat: Catalog, cid: str, name: str, value: float) -> None:
    old = profile.names.get(cid)
    if old is None or cat.rank(cid, name) < cat.rank(cid, old):
        profile.metrics[cid] = value
        profile.names[cid] = name


def _capped_note(what: str, count: int, first: list[int]) -> str:
    shown = ", ".join(map(str, first))
    return f"{count} {what} (rows {shown}{', ...' if count > len(first) else ''})"


def _parse_raw(header: list[str], rows: Iterator[list[str]], cat: Catalog) -> ParseResult:
    warnings: list[str] = []
    units: list[str] = [""] * len(header)
    first = next(rows, None)
    if first is not None and not first[0].strip():
        units = first + [""] * (len(header) - len(first))
    elif first is not None:
        rows = itertools.chain([first], rows)
    colmap: list[str | None] = []
    unknown: list[str] = []
    for h in header:
        if h in _ID_COLS:
            colmap.append(None)
            continue
        cid = cat.resolve(h, strict=True)
        colmap.append(cid)
        if cid is None and "__" in h:
            unknown.append(h)
    if not any(colmap):
        raise BadInput("none of the CSV's columns is a metric kwiki knows", hint="export with --page raw (all metrics) or --set full")
    profiles: list[LaunchProfile] = []
    short: list[int] = []
    n_short = 0
    for n, row in enumerate(rows):
        if n >= MAX_LAUNCHES:  # one row per launch: stop reading, the rest is never parsed
            warnings.append(f"the export has more than {MAX_LAUNCHES} launches; read the first {MAX_LAUNCHES}")
            break
        if len(row) < len(header):
            n_short += 1
            if len(short) < MAX_WARNINGS:
                short.append(n + 1)
        rec = dict(zip(header, row))
        p = LaunchProfile()
        _meta(p, rec)
        for i, cell in enumerate(row[: len(header)]):
            cid = colmap[i]
            if cid is None:
                continue
            v = parse_number(cell)
            if v is None:
                continue
            f = unit_factor(units[i] if i < len(units) else "")
            _put(p, cat, cid, header[i], v * f)
        p.unknown = unknown[:50]
        p.unknown_count = len(unknown)
        if p.metrics:
            profiles.append(p)
    if n_short:
        warnings.insert(0, _capped_note(f"rows have fewer than the header's {len(header)} columns (truncated file?); "
                                        "read what is there:", n_short, short))
    if not profiles:
        raise BadInput("the CSV has a header but no launch rows with numbers (empty or truncated export)", hint=EXPORT_HINT)
    return ParseResult(format="raw", profiles=profiles, warnings=warnings)


def _parse_details(header: list[str], rows: Iterator[list[str]], cat: Catalog) -> ParseResult:
    warnings: list[str] = []
    by_id: dict[str, LaunchProfile] = {}
    unknown: dict[str, list[str]] = {}
    unknown_count: dict[str, int] = {}
    short_rows = 0
    value_col = header.index("Metric Value")
    for row in rows:
        if len(row) < value_col + 1:
            short_rows += 1
            continue
        rec = dict(zip(header, row))
        lid = (rec.get("ID") or "0").strip()[:50]
        p = by_id.get(lid)
        if p is None:
            if len(by_id) >= MAX_LAUNCHES:  # ncu writes launches in order: the rest is never parsed
                warnings.append(f"the export has more than {MAX_LAUNCHES} launches; read the first {MAX_LAUNCHES}")
                break
            p = by_id[lid] = LaunchProfile()
            _meta(p, rec)
        section = (rec.get("Section Name") or "").strip()
        rule = (rec.get("Rule Name") or "").strip()
        metric = (rec.get("Metric Name") or "").strip()
        if rule and len(p.rules) < MAX_RULES_PER_LAUNCH:
            p.rules.append(RuleResult(
                section=section[:200], name=rule[:200], type=(rec.get("Rule Type") or "").strip()[:20],
                description=(rec.get("Rule Description") or "").strip()[:4000],
                speedup_type=(rec.get("Estimated Speedup Type") or "").strip()[:20],
                speedup=parse_number(rec.get("Estimated Speedup") or ""),
            ))
        if not metric:
            continue
        cid = cat.resolve(metric, section=section, strict=True)
        if cid is None:
            names = unknown.setdefault(lid, [])
            if len(names) < 50:
                names.append(f"{section[:100]}/{metric[:200]}")
            unknown_count[lid] = unknown_count.get(lid, 0) + 1
            continue
        v = parse_number(rec.get("Metric Value") or "")
        if v is None:
            continue
        _put(p, cat, cid, metric, v * unit_factor(rec.get("Metric Unit") or ""))
    if short_rows:
        warnings.append(f"{short_rows} rows were shorter than the header (truncated file?) and were skipped")
    profiles = []
    for lid, p in by_id.items():
        p.unknown = unknown.get(lid, [])
        p.unknown_count = unknown_count.get(lid, 0)
        if p.metrics or p.rules:
            profiles.append(p)
    if not profiles:
        raise BadInput("the details CSV has no metric or rule rows kwiki can read (empty or truncated export)", hint=EXPORT_HINT)
    return ParseResult(format="details", profiles=profiles, warnings=warnings)


# ------------------------------------------------------------------ JSON
def parse_json_text(text: str, catalog: Catalog | None = None) -> ParseResult:
    """Parse ``{metric: value}``, ``{"metrics": {...}, "kernel": "..."}`` or a list of those."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"invalid JSON: {str(exc)[:200]}") from None
    items = obj if isinstance(obj, list) else [obj]
    profiles = [parse_metrics_dict(o, catalog, launch_id=str(i)) for i, o in enumerate(items[:MAX_LAUNCHES]) if isinstance(o, dict)]
    if not profiles:
        raise BadInput("JSON must be an object {metric name: value} or a list of them")
    return ParseResult(format="json", profiles=profiles)


def parse_metrics_dict(obj: dict[str, Any], catalog: Catalog | None = None, launch_id: str = "0") -> LaunchProfile:
    """One profile from a ``{metric name: value}`` mapping (names in any spelling the catalog knows)."""
    cat = catalog or load_catalog()
    if not isinstance(obj, dict):
        raise BadInput("metrics must be an object {metric name: value}")
    p = LaunchProfile(launch_id=launch_id)
    inner = obj.get("metrics")
    metrics: dict[str, Any] = inner if isinstance(inner, dict) else obj
    if metrics is not obj:
        p.kernel = str(obj.get("kernel") or obj.get("kernel_name") or p.kernel)[:500]
        p.launch_id = str(obj.get("launch_id", obj.get("id", launch_id)))[:50]
        rules = obj.get("rules")
        for r in rules[:MAX_RULES_PER_LAUNCH] if isinstance(rules, list) else []:
            if isinstance(r, dict) and (r.get("name") or r.get("description")):
                p.rules.append(RuleResult(name=str(r.get("name") or "rule")[:200], description=str(r.get("description") or "")[:4000],
                                          section=str(r.get("section") or "")[:200], speedup=_num(r.get("speedup"))))
    unknown = []
    for key, raw in itertools.islice(metrics.items(), 20000):
        if not isinstance(key, str):
            continue
        cid = cat.resolve(key)
        if cid is None:
            if key not in ("kernel", "kernel_name", "launch_id", "id", "rules"):
                unknown.append(key[:200])
            continue
        v = _num(raw)
        if v is not None:
            _put(p, cat, cid, key, v)
    p.unknown, p.unknown_count = unknown[:50], len(unknown)
    return p


def _num(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        try:
            number = float(raw)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return number if math.isfinite(number) else None
    if isinstance(raw, str):
        if len(raw) > 100:  # no value is longer; the bound also keeps the match below linear
            return None
        m = re.match(r"\s*([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)\s*$", raw)
        if not m:
            return None
        v = parse_number(m.group(1))
        return None if v is None else v * unit_factor(m.group(2))
    return None


# ------------------------------------------------------------------ .ncu-rep
def _parse_report(data: bytes, cat: Catalog) -> ParseResult:
    ncu_report = ncu_report_module()
    if ncu_report is None:
        raise BadInput("this is an .ncu-rep report and the ncu_report module is not installed here", hint=EXPORT_HINT)
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".ncu-rep")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            ctx = ncu_report.load_report(path)
            profiles = list(_report_profiles(ctx, cat))
        except Exception as exc:  # the module raises its own types
            raise BadInput(f"could not read the .ncu-rep report: {str(exc)[:200]}", hint=EXPORT_HINT) from None
    finally:
        os.unlink(path)
    if not profiles:
        raise BadInput("the report holds no kernel launches", hint=EXPORT_HINT)
    return ParseResult(format="ncu-rep", profiles=profiles)


def _report_profiles(ctx: Any, cat: Catalog) -> Iterable[LaunchProfile]:
    """Walk an ``ncu_report`` context (API checked against Nsight Compute 2025.3.1's extras/python):
    ``as_double()`` returns base units (ns, bytes), the same as ``--print-units base``."""
    demangled = getattr(getattr(ncu_report_module(), "IAction", None), "NameBase_DEMANGLED", None)
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            act = rng.action_by_idx(i)
            try:
                kernel = str(act.name(demangled) if demangled is not None else act.name())
            except Exception:
                kernel = str(act.name())
            p = LaunchProfile(kernel=kernel[:500], launch_id=str(i) if ctx.num_ranges() == 1 else f"{r}:{i}")
            unknown = []
            for mname in act.metric_names():
                cid = cat.resolve(mname, strict=True)
                if cid is None:
                    unknown.append(mname)
                    continue
                try:
                    v = float(act.metric_by_name(mname).as_double())
                except Exception:
                    continue
                if math.isfinite(v):
                    _put(p, cat, cid, mname, v)
            p.unknown, p.unknown_count = unknown[:50], len(unknown)
            for rd in _rule_dicts(act):
                msg = rd.get("rule_message") or {}
                est = rd.get("speedup_estimation") or {}
                p.rules.append(RuleResult(
                    section=str(rd.get("section_identifier") or "")[:200], name=str(rd.get("rule_identifier") or rd.get("name") or "rule")[:200],
                    type="INF" if msg.get("type") == 1 else "OPT", description=str(msg.get("message") or "")[:4000],
                    speedup_type={1: "local", 2: "global"}.get(kind, "") if isinstance(kind := est.get("type"), int) else "", speedup=parse_number(est.get("speedup")),
                ))
            yield p


def _rule_dicts(act: Any) -> list[dict[str, Any]]:
    try:
        out = act.rule_results_as_dicts()
    except Exception:
        return []
    return [d for d in out if isinstance(d, dict)] if isinstance(out, (list, tuple)) else []


def ncu_report_module() -> Any:
    """The imported ``ncu_report`` module, or None."""
    try:
        import ncu_report
    except ImportError:
        return None
    return ncu_report
