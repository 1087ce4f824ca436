"""``kwiki ledger``: record, list and trace the candidates tried for a kernel task.

    kwiki ledger add --task transpose --id t03 --parent t01 --mechanism "pad the smem tile to 32x33" \\
        --technique technique-shared-memory-padding --pattern pattern-shared-memory-bank-conflicts \\
        --correct --bench "shape=8192x8192,dtype=fp32,gpu=H100,metric=bandwidth,value=1850,baseline=1160,unit=GB/s" \\
        --status promoted --reason "bank conflicts gone" --author agent:my-agent
    kwiki ledger add --from-json candidate.json          # or - for stdin; flags override its fields
    kwiki ledger list --task transpose --status rejected
    kwiki ledger show transpose/t03 --json
    kwiki ledger tree                                    # lineage per task, promoted path marked with *
    kwiki ledger import ../old-workspace                 # another workspace, or a folder of *.json candidates
    kwiki ledger status transpose/t03 rejected --reason "slower on B200"
    kwiki ledger lineage transpose/t07                   # its ancestors and descendants (recursive SQL)
    kwiki ledger attempts --kernel transpose_tiled --technique technique-smem-swizzling   # what failed before
    kwiki ledger migrate                                 # create/upgrade the schema; imports a JSONL workspace

The ledger is ``--workspace`` (its SQLite file), else ``$KWIKI_LEDGER_URL`` (PostgreSQL), else
``$KWIKI_LEDGER_DIR``, else ``<index_dir>/../ledger``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from kwiki.service.cli_common import Local, Url, load_settings, print_json, reported, server_for
from kwiki.settings import EXPERIENCE_K, LEDGER_PAGES

if TYPE_CHECKING:
    from kwiki.ledger import Candidate, Ledger
    from kwiki.profiling.compare import Comparison
    from kwiki.profiling.diagnose import DiagnoseResponse
    from kwiki.settings import Settings

app = typer.Typer(help="The candidate ledger: every kernel candidate tried, its parent, mechanism and outcome.",
                  no_args_is_help=True)

Workspace = Annotated[Optional[Path], typer.Option("--workspace", "-w", help="Ledger workspace folder (default: $KWIKI_LEDGER_URL, else $KWIKI_LEDGER_DIR, else <index_dir>/../ledger)")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON (the same document the HTTP API returns)")]


def _ledger(workspace: Path | None) -> Ledger:
    from kwiki.ledger import open_ledger

    return open_ledger(load_settings(), workspace)


def _warn_problems(problems: list[Any]) -> None:
    for p in problems:
        typer.secho(f"warning: {p.file}:{p.line}: {p.reason} (skipped)", fg="yellow", err=True)


def _bench(spec: str) -> dict[str, Any]:
    from kwiki.errors import BadRequest

    out: dict[str, Any] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise BadRequest(f"bad --bench '{spec}'", hint="KEY=VALUE pairs: shape=,dtype=,gpu=,metric=,value=,baseline=,unit=")
        out[key.strip()] = value.strip()
    return out


@app.command()
def add(
    task: Annotated[Optional[str], typer.Option("--task", help="Task the candidate belongs to")] = None,
    cand_id: Annotated[Optional[str], typer.Option("--id", help="Candidate id, unique in its task (default: next free cNNN)")] = None,
    parent: Annotated[Optional[str], typer.Option("--parent", help="Parent candidate id")] = None,
    kernel: Annotated[Optional[str], typer.Option("--kernel")] = None,
    mechanism: Annotated[Optional[str], typer.Option("--mechanism", "-m", help="The one mechanism changed, in one line")] = None,
    technique: Annotated[Optional[list[str]], typer.Option("--technique", help="Technique page id it applies; repeatable")] = None,
    pattern: Annotated[Optional[list[str]], typer.Option("--pattern", help="Pattern page id it addresses; repeatable")] = None,
    correct: Annotated[Optional[bool], typer.Option("--correct/--incorrect", help="Correctness result")] = None,
    correctness_detail: Annotated[Optional[str], typer.Option("--correctness-detail")] = None,
    bench: Annotated[Optional[list[str]], typer.Option("--bench", help="shape=..,dtype=..,gpu=..,metric=..,value=..,baseline=..,unit=..; repeatable")] = None,
    signal: Annotated[Optional[list[str]], typer.Option("--signal", help="Fired profiling signal; repeatable")] = None,
    metric: Annotated[Optional[list[str]], typer.Option("--metric", help="Key metric NAME=VALUE; repeatable")] = None,
    report: Annotated[Optional[list[str]], typer.Option("--report", help="Profile report path; repeatable")] = None,
    status: Annotated[Optional[str], typer.Option("--status", help="candidate | promoted | rejected")] = None,
    reason: Annotated[Optional[str], typer.Option("--reason")] = None,
    author: Annotated[Optional[str], typer.Option("--author", help="agent:NAME or person:NAME")] = None,
    from_json: Annotated[Optional[str], typer.Option("--from-json", help="A JSON candidate document (a file, or - for stdin)")] = None,
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """Append a candidate (or a new version of one: same task and id) to the ledger."""
    from kwiki.errors import BadRequest
    from kwiki.service.core import Kwiki

    with reported():
        kw = Kwiki(load_settings(), workspace=workspace)
        doc: dict[str, Any] = {}
        if from_json:
            text = sys.stdin.read() if from_json == "-" else Path(from_json).read_text(encoding="utf-8")
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                raise BadRequest(f"--from-json is not JSON: {exc}") from None
            if not isinstance(doc, dict):
                raise BadRequest("--from-json must hold one JSON object (a candidate)")
        flags = {"task": task, "id": cand_id, "parent": parent, "kernel": kernel, "mechanism": mechanism,
                 "techniques": technique or None, "patterns": pattern or None, "status": status, "reason": reason,
                 "author": author}
        doc.update({k: v for k, v in flags.items() if v is not None})
        if correct is not None or correctness_detail:
            doc["correctness"] = {**doc.get("correctness", {}), "passed": correct, "detail": correctness_detail or ""}
        if bench:
            doc["benchmarks"] = list(doc.get("benchmarks", [])) + [_bench(b) for b in bench]
        if signal or metric or report:
            ev = dict(doc.get("evidence") or {})
            ev["signals"] = list(ev.get("signals", [])) + list(signal or [])
            ev["reports"] = list(ev.get("reports", [])) + list(report or [])
            metrics = dict(ev.get("metrics") or {})
            for m in metric or []:
                name, _, value = m.partition("=")
                try:
                    metrics[name.strip()] = float(value)
                except ValueError:
                    raise BadRequest(f"bad --metric '{m}'", hint="NAME=NUMBER") from None
            ev["metrics"] = metrics
            doc["evidence"] = ev
        if not doc.get("task"):
            raise BadRequest("a candidate needs a task", hint="--task NAME")
        if (doc.get("techniques") or doc.get("patterns")) and kw.page_ids() is None:
            typer.secho(f"warning: technique and pattern ids not checked: no index at {kw.settings.index_dir}", fg="yellow", err=True)
        written = kw.add_candidate(doc)
    if json_out:
        print_json(written.model_dump(mode="json", exclude_none=True))
        return
    typer.echo(f"added {written.key} [{written.status}] to {kw.ledger.location}")


@app.command("list")
def list_(
    task: Annotated[Optional[str], typer.Option("--task")] = None,
    status: Annotated[Optional[str], typer.Option("--status", help="candidate | promoted | rejected")] = None,
    applies: Annotated[Optional[str], typer.Option("--applies", help="Only candidates applying this technique/pattern id")] = None,
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """List candidates (newest version of each), with status and reason."""
    from kwiki.ledger import filter_candidates

    with reported():
        led = _ledger(workspace)
        read = led.read(task=task, status=status)
        cands = filter_candidates(read.candidates, applies_to_id=applies)
    if json_out:
        print_json({"workspace": led.location, "candidates": [c.model_dump(mode="json", exclude_none=True) for c in cands],
                    "problems": [p.model_dump() for p in read.problems]})
        return
    _warn_problems(read.problems)
    for c in cands:
        line = f"{c.key:24} [{c.status:9}] {c.mechanism}"
        typer.echo(line[:160])
        if c.reason and c.status != "candidate":
            typer.echo(f"{'':26}{'why' if c.status == 'rejected' else 'kept'}: {c.reason}"[:160])
    if not cands:
        typer.echo("no candidates" + ("" if read.candidates or read.problems else f" (an empty ledger at {led.location})"))


@app.command()
def show(
    cand: Annotated[str, typer.Argument(help="task/id, or a bare id when only one task has it")],
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """Show one candidate: its record, rendered like its search page."""
    from kwiki.ledger import render_body

    with reported():
        c = _ledger(workspace).get(cand)
    if json_out:
        print_json(c.model_dump(mode="json", exclude_none=True))
        return
    typer.echo(render_body(c))
    if c.model_extra:
        typer.echo("other fields: " + json.dumps(c.model_extra, default=str))


@app.command()
def tree(
    task: Annotated[Optional[str], typer.Option("--task")] = None,
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """The lineage of candidates per task; * marks the path to every promoted candidate."""
    from kwiki.ledger import lineage, render_tree

    with reported():
        read = _ledger(workspace).read(task=task)
        trees = lineage(read.candidates)
    if json_out:
        print_json({"tasks": [t.model_dump() for t in trees], "problems": [p.model_dump() for p in read.problems]})
        return
    _warn_problems(read.problems)
    typer.echo(render_tree(trees) if trees else "no candidates")


@app.command("import")
def import_(
    source: Annotated[Path, typer.Argument(help="A workspace folder (candidates.jsonl, benchmark.csv) or a folder of *.json candidates")],
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """Append the candidates of another folder; ones already recorded identically are skipped."""
    from kwiki.ledger import import_dir

    with reported():
        led = _ledger(workspace)
        result = import_dir(led, source)
    if json_out:
        print_json(result)
        return
    for p in result["problems"]:
        typer.secho(f"warning: {p['file']}:{p['line']}: {p['reason']} (skipped)", fg="yellow", err=True)
    typer.echo(f"imported {len(result['added'])} candidates into {led.location}; {len(result['unchanged'])} already there")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Question, symptom or metric")],
    k: Annotated[int, typer.Option("-k", help="Number of knowledge pages")] = LEDGER_PAGES,
    experience_k: Annotated[int, typer.Option("--experience-k", "-e", help="Number of candidates")] = EXPERIENCE_K,
    status: Annotated[Optional[str], typer.Option("--status", help="Only candidates with this status (rejected: what failed)")] = None,
    index_dir: Annotated[Optional[Path], typer.Option("--index-dir", help="Index root (default: $KWIKI_INDEX_DIR or .kwiki/index)")] = None,
    workspace: Workspace = None,
    json_out: JsonOut = False,
    url: Url = None,
    local: Local = False,
) -> None:
    """The pages that explain the question, then the candidates that tried a fix, with their outcome (the same as
    GET /ledger/search; a running server answers when there is one)."""
    from kwiki.service.cli_remote import answer

    with reported():
        settings = load_settings(index_dir=index_dir)
        local = local or workspace is not None  # a workspace named here is not the server's ledger

        def in_process() -> dict[str, Any]:
            from kwiki.service.core import Kwiki, SearchRequest

            kw = Kwiki(settings, workspace=workspace)
            kw.load()
            return kw.tiered_search(SearchRequest(q=query, k=k), experience_k, status)

        params = {"q": query, "k": k, "experience_k": experience_k} | ({"status": status} if status else {})
        tiers: dict[str, Any] = answer(server_for(settings, url, local),
                                       lambda server: server.get("/ledger/search", params), in_process)
    if json_out:
        print_json(tiers)
        return
    typer.secho("pages", bold=True)
    for i, h in enumerate(tiers["pages"]["hits"], 1):
        typer.echo(f"{i:2}. {h['title']}\n    {h['id']}  [{h['type']}]  score {h['score']:.4f}")
    typer.secho(f"candidates tried ({tiers['experience']['total_candidates']} in the index)", bold=True)
    for i, h in enumerate(tiers["experience"]["hits"], 1):
        typer.echo(f"{i:2}. [{h['status']}] {h['mechanism']}  ({h['candidate']})")
        if h["reason"]:
            typer.echo(f"    {'why' if h['status'] == 'rejected' else 'outcome'}: {h['reason']}")
    if not tiers["experience"]["hits"]:
        typer.echo("    none" + ("" if tiers["experience"]["total_candidates"] else " (the ledger is empty: `kwiki ledger add`)"))


@app.command("status")
def status_(
    cand: Annotated[str, typer.Argument(help="task/id, or a bare id when only one task has it")],
    new_status: Annotated[str, typer.Argument(metavar="STATUS", help="candidate | promoted | rejected")],
    reason: Annotated[Optional[str], typer.Option("--reason", help="Why it was promoted or rejected")] = None,
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """Promote or reject a candidate (a new version with that status and reason)."""
    from kwiki.service.core import set_status

    with reported():
        c = set_status(_ledger(workspace), cand, new_status, reason)
    if json_out:
        print_json(c.model_dump(mode="json", exclude_none=True))
        return
    typer.echo(f"{c.key} is now {c.status}" + (f": {c.reason}" if c.reason else ""))


@app.command("lineage")
def lineage_(
    cand: Annotated[str, typer.Argument(help="task/id, or a bare id when only one task has it")],
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """A candidate's ancestors (root first) and everything derived from it."""
    from kwiki.ledger import lineage, render_tree
    from kwiki.service.core import candidate_lineage

    with reported():
        led = _ledger(workspace)
        if json_out:
            print_json(candidate_lineage(led, cand))
            return
        c = led.get(cand)
        up, down = led.ancestors(c.key), led.descendants(c.key)
    typer.secho("ancestors", bold=True)
    for i, a in enumerate(up):
        typer.echo(f"{'  ' * i}{a.key} [{a.status}] {a.mechanism}"[:160])
    if not up:
        typer.echo("  none (a root)" + (f"; parent '{c.parent}' is not in the ledger" if c.parent else ""))
    typer.secho("descendants", bold=True)
    typer.echo(render_tree(lineage([c, *down])) if down else "  none")


@app.command()
def attempts(
    kernel: Annotated[Optional[str], typer.Option("--kernel", help="Kernel (function) name")] = None,
    technique: Annotated[Optional[str], typer.Option("--technique", help="A technique or pattern page id")] = None,
    mechanism: Annotated[Optional[str], typer.Option("--mechanism", "-m", help="Words the mechanism must all contain")] = None,
    status: Annotated[str, typer.Option("--status", help="candidate | promoted | rejected | any")] = "rejected",
    task: Annotated[Optional[str], typer.Option("--task")] = None,
    workspace: Workspace = None,
    json_out: JsonOut = False,
) -> None:
    """Every attempt (by default every rejected one) on a kernel, of a technique and/or a mechanism."""
    with reported():
        found = _ledger(workspace).attempts(kernel, technique, mechanism, None if status == "any" else status, task)
    if json_out:
        print_json({"total": len(found), "candidates": [c.model_dump(mode="json", exclude_none=True) for c in found]})
        return
    for c in found:
        typer.echo(f"{c.key:24} [{c.status:9}] {c.mechanism}"[:160])
        if c.reason:
            typer.echo(f"{'':26}{'why' if c.status == 'rejected' else 'kept' if c.status == 'promoted' else 'note'}: {c.reason}"[:160])
    if not found:
        typer.echo("no attempts")


@app.command()
def migrate(workspace: Workspace = None, json_out: JsonOut = False) -> None:
    """Create or upgrade the ledger's schema now; a JSONL workspace is imported (its files are kept as they are)."""
    with reported():
        out = _ledger(workspace).migrate()
    if json_out:
        print_json(out)
        return
    typer.echo(f"{out['location']}: schema version {out['schema_version']}")
    imp = out["imported_jsonl"]
    if imp:
        typer.echo(f"imported from {', '.join(imp['from'])}: {imp['candidates']} candidates, {imp['versions']} versions, "
                   f"{imp['problems']} unreadable lines kept with their text")


def record_diagnosis(candidate_id: str, diagnosis: DiagnoseResponse, workspace: Path | None = None,
                     settings: Settings | None = None, report_path: str | None = None) -> Candidate:
    """``kwiki diagnose FILE --record CANDIDATE``: attach the diagnosis to the candidate (a note goes to stderr).

    Returns the new version of the candidate.
    """
    from kwiki.ledger import attach_diagnosis, open_ledger

    led = open_ledger(settings or load_settings(), workspace)
    cand = attach_diagnosis(led, candidate_id, diagnosis, report_path=report_path)
    signals = ", ".join(cand.evidence.signals[:5]) or "no signal"
    typer.echo(f"recorded on {cand.key} in {led.location}: {signals}", err=True)
    return cand


def record_comparison(candidate_id: str, comparison: Comparison, workspace: Path | None = None,
                      settings: Settings | None = None) -> Candidate:
    """``kwiki diagnose AFTER --baseline BEFORE --candidate ID``: attach the comparison (its after-diagnosis as the
    evidence, the comparison under ``evidence.comparison``); a note goes to stderr. Returns the new version."""
    from kwiki.ledger import open_ledger
    from kwiki.service.diagnosis import attach_comparison

    led = open_ledger(settings or load_settings(), workspace)
    cand = attach_comparison(led, candidate_id, comparison)
    typer.echo(f"recorded on {cand.key} in {led.location}: {comparison.verdict} "
               f"({comparison.speedup or 0:.2f}x against {comparison.before})", err=True)
    return cand
