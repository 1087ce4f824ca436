"""Diagnosis quality on a labeled folder of Nsight Compute exports: the first problem, the top three, healthy
kernels left alone, before/after pairs resolved, the hot source line.

A folder holds ``labels.yaml`` and the exports ``<stem>.raw.csv.gz`` (with ``<stem>.source.csv.gz`` where a source
page was captured). Each label says, decided from the code before anything was profiled:

- ``expected_first``: a signal id (``profiling/signals.yaml``) or ``healthy``; ``acceptable_top3``: ids that are
  also a right reading (for a healthy kernel, the roof it runs at); ``not_first``: ids that would be a wrong first call;
- ``pair``: the stem of its before/after partner (``kind: fixed`` is the after side);
- ``hot_line``: ``{file, line, tolerance}`` of the source line expected to stall most;
- ``scope``: where an export holds several kernels, the label is for the one with the largest share of GPU time.
  A label without ``scope`` on an export of several kernels is about the whole program: where a program-wide signal
  leads the program reading (``DiagnoseResponse.program``: launch overhead, and each kernel's signals weighted by
  its share of the program's wall time), it is scored on that reading; otherwise on the top kernel, as above.

The scoring rules, one per question a user asks of a diagnosis:

- **first**: a pathology's first signal is ``expected_first``. A healthy kernel's verdict is ``speed-of-light`` or
  ``no-signal``, or its first signal is the roof it runs at (an ``acceptable_top3`` id): no pathology named first;
- **top 3**: ``expected_first`` is among the first three signals (a healthy kernel: as for first);
- **pairs**: comparing the pathology (before) with its fix (after), the verdict is ``improved`` and the before
  side's first signal is in ``resolved`` (or no longer fires as first after);
- **hot line**: the first hotspot of the source page is the labeled line, within its tolerance.

    python -m kwiki.evals.diagnosis profiling/fixtures/blind [--json] [--revised]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import yaml
from pydantic import BaseModel, Field

from kwiki.profiling.compare import compare_bytes
from kwiki.profiling.diagnose import DiagnoseResponse, LaunchDiagnosis, diagnose_bytes
from kwiki.profiling.hotspots import parse_source_page
from kwiki.profiling.signals import load_signals

HEALTHY = "healthy"
#: Verdicts that name no problem.
CLEAN_VERDICTS = {"speed-of-light", "no-signal"}


class Label(BaseModel):
    what: str = ""
    kind: str = ""
    expected_first: str
    acceptable_top3: list[str] = Field(default_factory=list)
    not_first: list[str] = Field(default_factory=list)
    pair: str | None = None
    hot_line: dict[str, object] | None = None
    scope: str | None = None


class CaseResult(BaseModel):
    stem: str
    expected: str
    got: list[str]  # the scoped launch's signals, first first
    verdict: str | None
    first: bool
    top3: bool
    wrong_first: bool  # a label's not_first id, or any pathology on a healthy kernel, came first


class PairResult(BaseModel):
    before: str
    after: str
    verdict: str
    speedup: float | None
    measured_speedup: float | None = None
    resolved: bool


class LineResult(BaseModel):
    stem: str
    expected: str
    got: str | None
    hit: bool


class DiagnosisEval(BaseModel):
    cases: list[CaseResult]
    pairs: list[PairResult]
    lines: list[LineResult]

    def summary(self) -> dict[str, str]:
        def frac(xs: list[bool]) -> str:
            return f"{sum(xs)}/{len(xs)}"
        problems = [c for c in self.cases if c.expected != HEALTHY]
        healthy = [c for c in self.cases if c.expected == HEALTHY]
        return {"problem first": frac([c.first for c in problems]), "problem top 3": frac([c.top3 for c in problems]),
                "healthy left alone": frac([c.first for c in healthy]),
                "wrong first call": frac([c.wrong_first for c in self.cases]),
                "pairs resolved": frac([p.resolved for p in self.pairs]),
                "hot line named": frac([ln.hit for ln in self.lines])}


def load_labels(folder: Path, revised: bool = False) -> dict[str, Label]:
    """The labels as committed before capture; ``revised``: with each entry's ``revised:`` fields (a correction its
    author made after capture, from the raw counters) laid over them.

    A top-level ``aliases:`` map renames ids a label writer was given under another name (the writer never sees
    ``signals.yaml``); after it, every id must be a signal of ``signals.yaml`` or ``healthy``, else the folder is
    refused: a misspelled id would score as a silent miss."""
    raw = yaml.safe_load((folder / "labels.yaml").read_text(encoding="utf-8")) or {}
    aliases = raw.pop("aliases", None) or {}
    known = set(load_signals()) | {HEALTHY}
    out = {}
    for stem, entry in raw.items():
        fields = {k: v for k, v in entry.items() if k in Label.model_fields}
        if revised and isinstance(entry.get("revised"), dict):
            fields |= {k: v for k, v in entry["revised"].items() if k in Label.model_fields and k != "what"}
        label = Label.model_validate(fields)
        label.expected_first = aliases.get(label.expected_first, label.expected_first)
        label.acceptable_top3 = [aliases.get(i, i) for i in label.acceptable_top3]
        label.not_first = [aliases.get(i, i) for i in label.not_first]
        unknown = sorted({label.expected_first, *label.acceptable_top3, *label.not_first} - known)
        if unknown:
            raise ValueError(f"{folder / 'labels.yaml'}: {stem} names {unknown}, not signals of signals.yaml; "
                             f"fix the id or map it under a top-level 'aliases:'")
        out[stem] = label
    return out


def scoped_launch(resp: DiagnoseResponse) -> LaunchDiagnosis:
    """The launch a label is about: the longest launch of the kernel with the largest share of GPU time."""
    if resp.kernels:
        top = resp.kernels[0]
        launches = [d for d in resp.launches if (d.kernel or d.name) == top.kernel]
        if launches:
            return launches[min(top.longest, len(launches) - 1)]
    return resp.launches[0]


def program_scope(resp: DiagnoseResponse, label: Label) -> tuple[list[str], str | None] | None:
    """The signals (first first) and verdict a label without ``scope`` on an export of several kernels is scored on,
    when a program-wide signal (launch overhead) leads the program reading; None (score the top kernel's longest
    launch, as a label with a scope is) otherwise, so a kernel's own reading is never traded for another kernel's."""
    prog = resp.program
    if label.scope or len(resp.kernels) < 2 or prog is None or not prog.signals or prog.signals[0].kernel is not None:
        return None
    return list(dict.fromkeys(s.signal for s in prog.signals)), "limited"


def score_case(stem: str, label: Label, launch: LaunchDiagnosis, program: tuple[list[str], str | None] | None = None) -> CaseResult:
    got = [s.signal for s in launch.signals]
    status: str | None = launch.verdict.status if launch.verdict else None
    if program is not None:
        got, status = program
    if label.expected_first == HEALTHY:
        ok = status in CLEAN_VERDICTS or not got or got[0] in {*label.acceptable_top3, "speed-of-light"}
        return CaseResult(stem=stem, expected=HEALTHY, got=got[:5], verdict=status, first=ok, top3=ok, wrong_first=not ok)
    first = bool(got) and got[0] == label.expected_first
    return CaseResult(stem=stem, expected=label.expected_first, got=got[:5], verdict=status, first=first,
                      top3=label.expected_first in got[:3], wrong_first=bool(got) and got[0] in label.not_first)


def _read(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def measured_speedups(folder: Path) -> dict[str, float]:
    """``results.txt`` lines ``[RESULT] <stem> ... median_ms=X`` -> {stem: X}, when the folder has them."""
    out: dict[str, float] = {}
    path = folder / "results.txt"
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            parts = dict(p.split("=", 1) for p in words if "=" in p)
            bare = [w for w in (words[1:] if words[:1] in (["RESULT"], ["[RESULT]"]) else words[:1]) if "=" not in w]
            stem = parts.get("stem") or parts.get("case") or (bare[0] if bare else None)
            ms = parts.get("median_ms") or parts.get("ms")
            if stem and ms:
                try:
                    out[stem] = float(ms)
                except ValueError:
                    pass
    return out


def evaluate_folder(folder: Path, revised: bool = False) -> DiagnosisEval:
    labels = load_labels(folder, revised)
    cases, pairs, lines = [], [], []
    times = measured_speedups(folder)
    for stem, label in labels.items():
        raw = folder / f"{stem}.raw.csv.gz"
        resp = diagnose_bytes(_read(raw), raw.name)
        cases.append(score_case(stem, label, scoped_launch(resp), program_scope(resp, label)))
        src = folder / f"{stem}.source.csv.gz"
        if label.hot_line and label.hot_line.get("line") is not None and src.is_file():
            report = parse_source_page(_read(src))
            first = report.hotspots[0] if report.hotspots else None
            want_file, want_line = str(label.hot_line["file"]), int(str(label.hot_line["line"]))
            tol = int(str(label.hot_line.get("tolerance", 0)))
            hit = first is not None and first.line is not None and Path(first.file or "").name == want_file \
                and abs(first.line - want_line) <= tol
            got = f"{Path(first.file or '').name}:{first.line}" if first else None
            lines.append(LineResult(stem=stem, expected=f"{want_file}:{want_line}", got=got, hit=hit))
        if label.pair and label.kind != "fixed" and label.pair in labels:
            after = folder / f"{label.pair}.raw.csv.gz"
            cmp = compare_bytes(_read(raw), raw.name, _read(after), after.name)
            problem = label.expected_first
            kernels = cmp.kernels
            resolved = cmp.verdict == "improved" and bool(kernels) and (
                any(s.signal == problem for s in kernels[0].resolved) or kernels[0].after_top != problem)
            measured = round(times[stem] / times[label.pair], 2) if stem in times and label.pair in times else None
            pairs.append(PairResult(before=stem, after=label.pair, verdict=cmp.verdict, speedup=cmp.speedup,
                                    measured_speedup=measured, resolved=resolved))
    return DiagnosisEval(cases=cases, pairs=pairs, lines=lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--revised", action="store_true", help="score against the labels' post-capture revisions")
    args = ap.parse_args(argv)
    if not (args.folder / "labels.yaml").is_file():
        print(f"no labels.yaml in {args.folder}", file=sys.stderr)
        return 2
    res = evaluate_folder(args.folder, args.revised)
    if args.json:
        print(res.model_dump_json(indent=1))
        return 0
    for c in res.cases:
        mark = "ok " if c.first else ("top3" if c.top3 else "MISS")
        print(f"{mark:4} {c.stem}: expected {c.expected}; got {c.verdict} {c.got[:3]}{'  WRONG FIRST' if c.wrong_first else ''}")
    for p in res.pairs:
        print(f"pair {p.before}->{p.after}: {p.verdict} x{p.speedup} (unprofiled x{p.measured_speedup}) resolved={p.resolved}")
    for ln in res.lines:
        print(f"line {ln.stem}: expected {ln.expected} got {ln.got} {'ok' if ln.hit else 'MISS'}")
    print(json.dumps(res.summary()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
