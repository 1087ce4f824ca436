"""``kwiki validate``: check a corpus the way a reviewer would, file by file and line by line.

Checks: the page-type schema (``data/schemas.yaml``), the controlled vocabulary (``data/tags.yaml``),
id uniqueness and prefixes, that every ``related``, ``prerequisites``, ``candidate_techniques`` and
``sources`` id and every relative body link resolves, the ``verified`` evidence rule, that technique,
kernel and language pages carry a real code block, ``ncu_signals`` entries, and artifact checksums::

    >>> problems = validate_corpus(Path("corpus"))            # doctest: +SKIP
    >>> [p for p in problems if p.level == "error"]           # doctest: +SKIP
    []
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .corpus import MAX_QUESTIONS, MAX_QUESTION_CHARS, CorpusRoot, IngestResult, load_vocabulary, read_corpora
from .frontmatter import FrontmatterError, parse_yaml
from .models import FACETS, Page

REPRO = ["concept", "pseudocode", "snippet", "runnable", "benchmarked"]
CONFIDENCE = {"verified", "source-reported", "inferred", "experimental"}
REF_FIELDS = ("related", "prerequisites", "candidate_techniques", "sources")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.M | re.S)


@dataclass
class Problem:
    path: str
    line: int
    message: str
    level: str = "error"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.level}: {self.message}"


def _field_line(page: Page, field: str, root: Path) -> int:
    try:
        lines = (root / page.path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return 1
    for i, line in enumerate(lines[: page.body_line], 1):
        if line.startswith(f"{field}:"):
            return i
    return 1


def _schemas(root: Path) -> dict:
    path = root / "data" / "schemas.yaml"
    try:
        data = parse_yaml(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, FrontmatterError):
        return {}
    return data if isinstance(data, dict) else {}


def validate_corpus(root: Path, known_signals: set[str] | None = None) -> list[Problem]:
    """Every problem in the corpus at ``root`` (errors and warnings), sorted by file and line."""
    root = Path(root)
    result = read_corpora([CorpusRoot("corpus", root)])
    problems = [Problem(p.path, 1, f"skipped: {p.reason}") for p in result.report.skipped]
    problems += [Problem(p.path, 1, p.reason) for p in result.report.duplicates]
    schemas = _schemas(root)
    vocab = load_vocabulary(root).tags
    every_value = set().union(*vocab.values()) if vocab else set()
    by_id = {p.id: p for p in result.pages}
    by_path = {p.path: p for p in result.pages}
    if known_signals is None:
        try:
            from kwiki.profiling.signals import load_signals

            known_signals = set(load_signals())
        except Exception:  # noqa: BLE001 - profiling is optional for validating a KernelWiki checkout
            known_signals = set()

    for page in result.pages:
        line = lambda f: _field_line(page, f, root)  # noqa: E731
        schema = schemas.get(page.type, {}) if isinstance(schemas.get(page.type), dict) else {}
        for field in schema.get("required", []):
            if field not in page.meta:
                problems.append(Problem(page.path, 1, f"{page.type} page lacks required field '{field}'"))
        prefix = schema.get("id_prefix")
        if prefix and not page.id.startswith(prefix):
            problems.append(Problem(page.path, line("id"), f"id '{page.id}' should start with '{prefix}'"))
        if page.meta.get("confidence") is not None and page.confidence not in CONFIDENCE:
            problems.append(Problem(page.path, line("confidence"), f"unknown confidence '{page.confidence}'"))
        minimum = schema.get("reproducibility_minimum")
        if minimum and page.reproducibility in REPRO and REPRO.index(page.reproducibility) < REPRO.index(minimum):
            problems.append(Problem(page.path, line("reproducibility"), f"reproducibility below '{minimum}'"))
        if schema.get("code_block_required") and not any(len(b.strip().splitlines()) >= 3 for _, b in _FENCE.findall(page.body)):
            problems.append(Problem(page.path, page.body_line, "needs a real code block (a fence of 3+ lines)"))
        for facet in FACETS:
            allowed = every_value if facet == "tags" else vocab.get(facet)
            for value in page.facet(facet):
                if allowed is not None and value not in allowed:
                    problems.append(Problem(page.path, line(facet), f"{facet} value '{value}' is not in data/tags.yaml"))
        for field in REF_FIELDS:
            for ref in getattr(page, field):
                if ref not in by_id:
                    problems.append(Problem(page.path, line(field), f"{field} id '{ref}' does not resolve"))
                elif ref == page.id and field != "sources":
                    problems.append(Problem(page.path, line(field), f"{field} lists the page itself", "warning"))
        if page.confidence == "verified":
            cats = {str(by_id[s].meta.get("source_category")) for s in page.sources if s in by_id}
            if not {"official-doc", "upstream-code"} <= cats:
                problems.append(Problem(page.path, line("confidence"),
                                        "'verified' needs an official-doc and an upstream-code source"))
        if page.type == "pattern":
            for i, sig in enumerate(page.ncu_signals):
                missing = [k for k in ("signal", "metrics", "threshold") if k not in sig]
                if missing:
                    problems.append(Problem(page.path, line("ncu_signals"), f"ncu_signals[{i}] lacks {', '.join(missing)}"))
                elif known_signals and sig["signal"] not in known_signals:
                    problems.append(Problem(page.path, line("ncu_signals"), f"unknown signal id '{sig['signal']}'"))
        raw = page.meta.get("questions")
        given = len(raw) if isinstance(raw, list) else int(raw is not None)
        if given > len(page.questions):
            problems.append(Problem(page.path, line("questions"), f"{given - len(page.questions)} of {given} questions "
                                    f"ignored: each must be text of at most {MAX_QUESTION_CHARS} characters, "
                                    f"{MAX_QUESTIONS} per page", "warning"))
        problems += _links(page, root, by_path)
    problems += _artifacts(root, result, by_id)
    return sorted(problems, key=lambda p: (p.path, p.line, p.message))


def _links(page: Page, root: Path, by_path: dict[str, Page]) -> list[Problem]:
    out = []
    body = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.body)  # links inside code are not links
    for n, text in enumerate(body.split("\n"), page.body_line):
        for target in _LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            rel = target.split("#", 1)[0]
            resolved = (root / page.path).parent / rel
            try:
                key = str(resolved.resolve().relative_to(root.resolve()))
            except ValueError:
                out.append(Problem(page.path, n, f"link '{target}' leaves the corpus"))
                continue
            if key not in by_path and not resolved.exists():
                out.append(Problem(page.path, n, f"link '{target}' does not resolve"))
    return out


def _artifacts(root: Path, result: IngestResult, by_id: dict[str, Page]) -> list[Problem]:
    out = []
    for art in result.artifacts:
        if art.kind != "provenance":
            continue
        prov = f"{art.path}/PROVENANCE.yaml"
        for pid in art.page_ids:
            if pid not in by_id:
                out.append(Problem(prov, 1, f"page_ids entry '{pid}' does not resolve"))
        for f in art.files:
            local = root / art.path / str(f.get("local_path", ""))
            if not local.is_file():
                out.append(Problem(prov, 1, f"file '{f.get('local_path')}' is missing"))
            elif f.get("sha256") and hashlib.sha256(local.read_bytes()).hexdigest() != f["sha256"]:
                out.append(Problem(prov, 1, f"sha256 of '{f.get('local_path')}' does not match"))
    return out
