"""The ledger's records: one :class:`Candidate` per kernel candidate tried, and the reader of the JSONL era.

A candidate is a pydantic model; unknown fields are kept (``extra="allow"``). The database that stores them is
:mod:`.db`. Workspaces written before it (``candidates.jsonl``: one candidate a line, a later line with the same
``task`` and ``id`` a newer version; ``benchmark.csv``: one figure a row) are read by :class:`JsonlWorkspace`,
tolerantly: a malformed line is reported with its line number and skipped, the rest is read::

    >>> from kwiki.ledger import Candidate
    >>> c = Candidate(id="t03", task="transpose", parent="t01", mechanism="pad the  smem tile   to 33 columns")
    >>> c.key, c.parent_key, c.mechanism
    ('transpose/t03', 'transpose/t01', 'pad the smem tile to 33 columns')
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from rapidfuzz import fuzz, process

from kwiki.errors import BadRequest, NotFound

CANDIDATES_FILE = "candidates.jsonl"
BENCHMARK_FILE = "benchmark.csv"
BENCH_COLUMNS = ("candidate_id", "task", "shape", "dtype", "gpu", "metric", "value", "baseline", "unit")
STATUSES = ("candidate", "promoted", "rejected")
#: A record larger than this is refused: a ledger line is a summary, the reports live beside it.
MAX_RECORD_BYTES = 256 * 1024
#: Nearest ids named in the hint of an unknown id.
HINT_IDS = 3

Status = Literal["candidate", "promoted", "rejected"]


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Author(BaseModel):
    """Who made the candidate: an agent (``agent:claude-opus``) or a person (``person:ana`` or just ``ana``)."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["agent", "person"] | None = None
    name: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            kind, sep, name = value.partition(":")
            if sep and kind.strip() in ("agent", "person"):
                return {"kind": kind.strip(), "name": name.strip()}
            return {"name": value.strip()}
        return value

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.kind else self.name


class Correctness(BaseModel):
    """Did the candidate still compute the right answer? ``passed`` is None when not checked yet."""

    model_config = ConfigDict(extra="allow")
    passed: bool | None = None
    detail: str = ""  # e.g. "max abs err 0 vs reference on 12 shapes"
    max_abs_error: float | None = None


class Benchmark(BaseModel):
    """One measured figure: ``value`` of ``metric`` for this candidate, ``baseline`` for its parent or reference."""

    model_config = ConfigDict(extra="allow")
    shape: str = ""
    dtype: str = ""
    gpu: str = ""
    metric: str = ""
    value: float | None = None
    baseline: float | None = None
    unit: str = ""

    def key(self) -> tuple[str, str, str, str]:
        return (self.shape, self.dtype, self.gpu, self.metric)

    @property
    def speedup(self) -> float | None:
        """value / baseline (for a time metric a speed-up is below 1; the rendering says which)."""
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline


class Evidence(BaseModel):
    """What the profile showed: fired signals and key metrics from ``kwiki diagnose``, and the reports."""

    model_config = ConfigDict(extra="allow")
    signals: list[str] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    reports: list[str] = Field(default_factory=list)
    notes: str = ""
    diagnosed_at: str | None = None

    @field_validator("metrics", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        # NaN/inf would be written as null and make the line unreadable: a metric without a value is dropped
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None and not (isinstance(v, float) and not math.isfinite(v))}
        return value


class Candidate(BaseModel):
    """One kernel candidate: what changed relative to its parent, and what came of it.

    ``techniques`` and ``patterns`` are corpus page ids (``technique-shared-memory-padding``,
    ``pattern-shared-memory-bank-conflicts``); they link the candidate into the knowledge pages.
    """

    model_config = ConfigDict(extra="allow")
    id: str = Field(..., min_length=1, max_length=120, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    parent: str | None = Field(default=None, max_length=120)
    task: str = Field(..., min_length=1, max_length=120, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    kernel: str = ""
    mechanism: str = Field(default="", max_length=500, description="The one mechanism changed, in one line")
    techniques: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    correctness: Correctness = Field(default_factory=Correctness)
    benchmarks: list[Benchmark] = Field(default_factory=list)
    evidence: Evidence = Field(default_factory=Evidence)
    status: Status = "candidate"
    reason: str = ""
    created_at: str | None = None
    updated_at: str | None = None
    author: Author | None = None

    @field_validator("parent", mode="before")
    @classmethod
    def _empty_parent(cls, value: Any) -> Any:
        return None if value in ("", "-", "none", "null") else value

    @field_validator("mechanism")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("techniques", "patterns", mode="before")
    @classmethod
    def _as_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value or []

    @property
    def key(self) -> str:
        """Unique in a workspace: ``<task>/<id>`` (ids are unique within a task)."""
        return f"{self.task}/{self.id}"

    @property
    def parent_key(self) -> str | None:
        """The parent's key; a parent in another task is written ``task/id``."""
        if not self.parent:
            return None
        return self.parent if "/" in self.parent else f"{self.task}/{self.parent}"

    def applies(self) -> list[str]:
        """The corpus page ids this candidate applies (techniques, then patterns)."""
        return list(dict.fromkeys(self.techniques + self.patterns))


class LineProblem(BaseModel):
    file: str
    line: int
    reason: str


class LedgerRead(BaseModel):
    """The newest version of every candidate (in first-seen order) and the lines that were skipped."""

    candidates: list[Candidate] = Field(default_factory=list)
    problems: list[LineProblem] = Field(default_factory=list)
    lines: int = 0

    def get(self, ref: str) -> Candidate:
        """``task/id``, or a bare ``id`` when only one task has it."""
        ref = ref.strip()
        exact = [c for c in self.candidates if c.key == ref]
        found = exact or [c for c in self.candidates if c.id == ref]
        if not found:
            close = nearest(ref, [c.key for c in self.candidates])
            raise NotFound(f"no candidate '{ref[:120]}'", hint=(f"nearest: {', '.join(close)}; " if close else "")
                           + "`kwiki ledger list` shows the ids (task/id)")
        if len(found) > 1:
            raise BadRequest(f"candidate id '{ref}' is in several tasks: {', '.join(c.task for c in found)}",
                             hint=f"use task/id, e.g. {found[0].key}")
        return found[0]


def _merge_benchmarks(cand: Candidate, rows: list[Benchmark]) -> None:
    have = {b.key() for b in cand.benchmarks}
    for b in rows:
        if b.key() not in have:
            cand.benchmarks.append(b)
            have.add(b.key())


def _float(text: str | None) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


class JsonlWorkspace:
    """A workspace of the JSONL era (``candidates.jsonl`` + ``benchmark.csv``), read only: what
    :class:`~kwiki.ledger.Ledger` imports on its first write, and what it reads from until then."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.candidates_path = self.root / CANDIDATES_FILE
        self.benchmark_path = self.root / BENCHMARK_FILE

    def exists(self) -> bool:
        return self.candidates_path.is_file()

    def stamp(self) -> tuple[int, int, int, int]:
        """(size, mtime) of both files: a changed stamp means the files changed."""
        out: list[int] = []
        for path in (self.candidates_path, self.benchmark_path):
            try:
                st = path.stat()
                out += [st.st_size, st.st_mtime_ns]
            except OSError:
                out += [-1, -1]
        return (out[0], out[1], out[2], out[3])

    def read(self, versions: list[Candidate] | None = None, raw_problems: list[str] | None = None) -> LedgerRead:
        """Read both files tolerantly; a missing workspace reads as empty. ``versions`` (when given) receives
        every valid line in file order (each version of each candidate), ``raw_problems`` the text of each
        skipped line (so an import loses nothing)."""
        out = LedgerRead()
        latest: dict[str, Candidate] = {}
        if self.candidates_path.is_file():
            with open(self.candidates_path, "rb") as fh:
                for n, raw in enumerate(fh, 1):
                    out.lines = n
                    before = len(out.problems)
                    cand = self._parse_line(raw, n, out.problems)
                    if cand is not None:
                        latest[cand.key] = cand  # dict keeps first-seen order; the newest version wins
                        if versions is not None:
                            versions.append(cand)
                    elif raw_problems is not None and len(out.problems) > before:
                        raw_problems.append(raw.decode("utf-8", "replace").rstrip("\n"))
        bench_raw: list[str] = []
        for cand_key, rows in self._read_benchmarks(latest, out.problems, bench_raw).items():
            _merge_benchmarks(latest[cand_key], rows)  # the newest version (the same object as its entry in versions)
        if raw_problems is not None:
            raw_problems += bench_raw
        out.candidates = list(latest.values())
        return out

    def _parse_line(self, raw: bytes, n: int, problems: list[LineProblem]) -> Candidate | None:
        name = CANDIDATES_FILE
        if not raw.strip():
            return None
        try:
            data = json.loads(raw.decode("utf-8").strip())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(LineProblem(file=name, line=n, reason=f"not JSON: {exc}"[:300]))
            return None
        if not isinstance(data, dict):
            problems.append(LineProblem(file=name, line=n, reason=f"a JSON {type(data).__name__}, not an object"))
            return None
        try:
            return Candidate.model_validate(data)
        except ValidationError as exc:
            problems.append(LineProblem(file=name, line=n, reason=validation_reason(exc)))
            return None

    def _read_benchmarks(self, cands: dict[str, Candidate], problems: list[LineProblem],
                         raw_rows: list[str]) -> dict[str, list[Benchmark]]:
        rows: dict[str, list[Benchmark]] = {}
        if not self.benchmark_path.is_file():
            return rows
        try:
            text = self.benchmark_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            problems.append(LineProblem(file=BENCHMARK_FILE, line=0, reason=str(exc)))
            return rows
        reader = csv.DictReader(io.StringIO(text))
        lines = text.splitlines()
        if not reader.fieldnames or "candidate_id" not in reader.fieldnames:
            problems.append(LineProblem(file=BENCHMARK_FILE, line=1, reason="no header with a candidate_id column"))
            raw_rows.append(text)
            return rows
        by_id: dict[str, list[str]] = {}
        for key, c in cands.items():
            by_id.setdefault(c.id, []).append(key)
        for row in reader:
            row = {k: csv_uncell(v) if isinstance(v, str) else v for k, v in row.items()}
            line = reader.line_num
            cid = (row.get("candidate_id") or "").strip()
            task = (row.get("task") or "").strip()
            keys = [f"{task}/{cid}"] if task else by_id.get(cid, [])
            if len(keys) != 1 or keys[0] not in cands:
                why = f"candidate '{cid}' is in several tasks; add a task column" if len(keys) > 1 else f"no candidate '{task + '/' if task else ''}{cid}'"
                problems.append(LineProblem(file=BENCHMARK_FILE, line=line, reason=why))
                raw_rows.append(lines[line - 1] if 0 < line <= len(lines) else "")
                continue
            try:
                extra = {k: v for k, v in row.items() if k and k not in BENCH_COLUMNS and v not in (None, "")}
                bench = Benchmark(shape=(row.get("shape") or "").strip(), dtype=(row.get("dtype") or "").strip(),
                                  gpu=(row.get("gpu") or "").strip(), metric=(row.get("metric") or "").strip(),
                                  value=_float(row.get("value")), baseline=_float(row.get("baseline")),
                                  unit=(row.get("unit") or "").strip(), **extra)
            except (ValueError, ValidationError, TypeError) as exc:
                problems.append(LineProblem(file=BENCHMARK_FILE, line=line, reason=f"bad number: {exc}"[:300]))
                raw_rows.append(lines[line - 1] if 0 < line <= len(lines) else "")
                continue
            rows.setdefault(keys[0], []).append(bench)
        return rows


def validation_reason(exc: ValidationError, n: int = 3) -> str:
    """The first ``n`` errors of a validation, one line: ``status: Input should be ...; id: Field required``."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:n])[:300]


def nearest(ref: str, choices: Sequence[str], n: int = HINT_IDS) -> list[str]:
    """The ``n`` choices closest to ``ref`` (edit distance), best first: the hint of an unknown id.

    >>> nearest("technique-smem-swizling", ["technique-smem-swizzling", "pattern-tail-effect", "technique-split-k"], 1)
    ['technique-smem-swizzling']
    """
    return [c for c, _, _ in process.extract(ref, list(choices), scorer=fuzz.ratio, limit=n)] if choices else []


def bare_page_id(value: str) -> str:
    """``technique-x`` and ``pattern-x`` name the page ``x`` of their kind; the bare name is what links match on."""
    return value.removeprefix("technique-").removeprefix("pattern-")


def page_variants(value: str) -> set[str]:
    """The page ids a technique or pattern reference may mean: ``shared-memory-padding`` is the technique page of
    that name, and ``technique-x`` matches ``x``."""
    bare = bare_page_id(value)
    return {value, bare, f"technique-{bare}", f"pattern-{bare}"}


def applies_to(cand: Candidate, page_ids: set[str]) -> bool:
    """Does the candidate apply (technique) or address (pattern) one of ``page_ids``?"""
    return any(page_variants(a) & page_ids for a in cand.applies())


#: A cell starting with one of these is a formula to a spreadsheet (``=cmd|' /C calc'!A0``).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_uncell(text: str) -> str:
    """The inverse of :func:`csv_cell` when the file is read back."""
    return text[1:] if text.startswith("'") and text[1:2] and text[1] in _FORMULA_START else text
