"""The ``kwiki`` command line: one sub-command per stage, lazy imports, ``--json`` everywhere.

    kwiki ingest --corpus corpus --corpus ../shared/kernelwiki-snapshot
    kwiki search "only 8 of my 132 SMs are busy at the end" -k 5
    kwiki page pattern-tail-effect
    kwiki serve --port 8000
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from kwiki import __version__
from kwiki.service.cli_common import BuildsDir, IndexDir, JsonOut, Local, Url, load_settings, print_json, reported, server_for
from kwiki.settings import DEFAULT_K, PAGES_PER_SIGNAL

if TYPE_CHECKING:
    from kwiki.index.results import PageResponse, SearchResponse
    from kwiki.ingest.models import PageSource
    from kwiki.profiling.compare import Comparison
    from kwiki.profiling.diagnose import DiagnoseResponse
    from kwiki.service.cli_remote import Server

app = typer.Typer(help="kwiki: ranked, sourced GPU-kernel optimization knowledge.", no_args_is_help=True,
                  pretty_exceptions_enable=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kwiki {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version")] = False,
) -> None:
    """kwiki answers kernel-optimization questions with ranked pages, their sources and confidence."""


@app.command()
def ingest(
    corpus: Annotated[Optional[list[str]], typer.Option("--corpus", "-c", help="Corpus root (PATH or NAME=PATH); repeatable")] = None,
    index_dir: IndexDir = None,
    json_out: JsonOut = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    ledger: Annotated[Optional[list[Path]], typer.Option("--ledger", help="Ledger workspace whose candidates to index (type experience); repeatable")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when no corpus file changed")] = False,
) -> None:
    """Read corpora and build a new index (switched in atomically when complete)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import corpus_root

    settings = load_settings(index_dir=index_dir)
    roots = [corpus_root(c) for c in corpus] if corpus else [corpus_root(p) for p in settings.corpora]
    console = Console(stderr=True)
    with reported(), Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                              console=console, disable=quiet or json_out or not console.is_terminal) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task({"read": "reading pages", "embed": "embedding chunks"}.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        sources = _ledger_source(ledger or [], console)
        result = build_index(settings.index_dir, roots, threads=settings.embed_threads,
                             max_page_bytes=settings.max_page_bytes, progress=progress, page_sources=sources,
                             skip_unchanged=not force, adapter=settings.embed_adapter)
    if json_out:
        print_json({"path": str(result.path), "unchanged": result.unchanged, "manifest": result.manifest.model_dump(),
                     "report": result.report.model_dump(), "skipped_roots": [p.model_dump() for p in result.skipped_roots]})
        return
    if result.unchanged:
        for p in result.skipped_roots:  # the report is the served build's; a root that gives nothing is named anyway
            console.print(f"[yellow]skipped root {escape(p.corpus)} ({escape(p.path)}): {p.reason}", highlight=False,
                          soft_wrap=True)
        console.print(f"index is up to date ({result.manifest.build_id}); nothing changed in the corpus files "
                      "(`kwiki ingest --force` rebuilds anyway)", soft_wrap=True)
        return
    _print_report(console, result)
    if not result.report.pages:
        console.print("[yellow]warning: the index holds no page: search will find nothing (check the --corpus folders)",
                      soft_wrap=True)


def _ledger_source(dirs: list[Path], console: Any) -> list[PageSource]:
    """The candidates of ``kwiki ingest --ledger DIR`` as a page source (skipped lines are reported, not fatal)."""
    if not dirs:
        return []
    from rich.markup import escape

    from kwiki.ledger import ledger_source

    source, problems = ledger_source(dirs)
    for p in problems:
        console.print(f"[yellow]ledger: {escape(f'{p.file}:{p.line}: {p.reason}')} (skipped)", highlight=False)
    return [source]


def _print_report(console: Any, result: Any) -> None:
    from rich.table import Table

    rep, man = result.report, result.manifest
    table = Table(title=f"index {man.build_id}", show_edge=False)
    table.add_column("type")
    table.add_column("pages", justify="right")
    table.add_column("chunks", justify="right")
    for t, n in rep.pages_by_type.items():
        table.add_row(t, str(n), str(rep.chunks_by_type.get(t, 0)))
    table.add_row("[b]total", f"[b]{rep.pages}", f"[b]{rep.chunks}")
    console.print(table)
    console.print(f"corpora: {', '.join(f'{k} ({v})' for k, v in rep.corpora.items())}")
    console.print(f"artifacts: {rep.artifacts}; embedded {man.embedded} new chunks; built in {man.build_seconds:.1f} s")
    for title, items in (("skipped", rep.skipped), ("duplicate ids", rep.duplicates), ("warnings", rep.warnings)):
        if items:
            console.print(f"[yellow]{title} ({len(items)}):")
            for p in items[:25]:
                console.print(f"  {p.corpus}:{p.path}: {p.reason}", markup=False)
            if len(items) > 25:
                console.print(f"  ... and {len(items) - 25} more (see report.json in the build)")
    if rep.unknown_vocabulary:
        console.print("[yellow]unknown vocabulary:")
        for facet, values in rep.unknown_vocabulary.items():
            console.print(f"  {facet}: {', '.join(values[:15])}{' ...' if len(values) > 15 else ''}", markup=False)
    console.print(f"index: {result.path}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Question, symptom, metric name or NCU rule message")],
    k: Annotated[int, typer.Option("-k", help="Number of pages")] = DEFAULT_K,
    type: Annotated[Optional[list[str]], typer.Option("--type", help="Page type filter; repeatable")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag")] = None,
    architecture: Annotated[Optional[list[str]], typer.Option("--arch", help="sm90, sm100, B200, H100 ...")] = None,
    language: Annotated[Optional[list[str]], typer.Option("--language")] = None,
    confidence: Annotated[Optional[list[str]], typer.Option("--confidence")] = None,
    corpus: Annotated[Optional[list[str]], typer.Option("--corpus")] = None,
    index_dir: IndexDir = None,
    json_out: JsonOut = False,
    url: Url = None,
    local: Local = False,
) -> None:
    """Search the index (the same code path as GET /search; a running server answers when there is one)."""
    from kwiki.index.results import SearchResponse
    from kwiki.service.cli_remote import answer

    body = {"q": query, "k": k, "type": type or [], "tag": tag or [], "architecture": architecture or [],
            "language": language or [], "confidence": confidence or [], "corpus": corpus or []}
    with reported():
        settings = load_settings(index_dir=index_dir)

        def in_process() -> SearchResponse:
            from kwiki.service.core import Kwiki, SearchRequest

            kw = Kwiki(settings)
            kw.load()
            return kw.search(SearchRequest.model_validate(body))

        resp = answer(server_for(settings, url, local),
                      lambda server: SearchResponse.model_validate(server.post("/search", body)), in_process)
    if json_out:
        print_json(resp)
        return
    if resp.signals:
        typer.secho("NCU signals: " + ", ".join(s["signal"] for s in resp.signals[:3]), fg="cyan")
    read = resp.interpreted
    if read.corrections:
        typer.secho("also searched: " + ", ".join(map(str, read.corrections)), fg="cyan")
    if read.clauses:
        typer.secho(f"matched clause by clause ({len(read.clauses)}): " + " | ".join(read.clauses), fg="cyan")
    if resp.no_match:
        typer.secho(resp.note or "no page matches this query well", fg="yellow")
    for i, h in enumerate(resp.hits, 1):
        typer.secho(f"{i:2}. {h.title}", bold=True)
        typer.echo(f"    {h.id}  [{h.type}, {h.confidence or 'no confidence'}, {h.corpus}]  score {h.score:.4f}")
        if h.heading_path:
            typer.echo(f"    § {' > '.join(h.heading_path)}")
        typer.echo(f"    {h.snippet[:240]}")
        if h.why.sentence:
            typer.echo(f"    matched: \"{h.why.sentence[:200]}\"")
        if h.why.fix_of:
            typer.echo(f"    a fix named by {h.why.fix_of}")
        if h.why.related_to:
            typer.echo(f"    related to {h.why.related_to}")
        if h.why.clause:
            typer.echo(f"    answers: \"{h.why.clause[:200]}\"")
        if h.sources:
            typer.echo("    sources: " + ", ".join(s.url or s.id for s in h.sources[:3]))
    if not resp.hits:
        typer.echo("no results")
    if resp.experience:
        typer.secho("tried before (candidate ledger):", bold=True)
        for e in resp.experience:
            typer.echo(f"    [{e.get('status', '?')}] {e.get('candidate', e.get('id'))}: {e.get('mechanism') or e.get('title')}"
                       + (f" - {e['reason']}" if e.get("reason") else ""))


@app.command()
def page(
    page_id: Annotated[str, typer.Argument(help="A page id from a search hit (pattern-tail-effect), or a link to the "
                                            "page's file as page bodies write it (../techniques/stream-k.md)")],
    index_dir: IndexDir = None,
    json_out: JsonOut = False,
    url: Url = None,
    local: Local = False,
) -> None:
    """Show a page with its sources and artifacts (the same as GET /pages/{id}; a running server answers when there is
    one). In process only the build's pages are read: no model, no vectors."""
    from kwiki.index.results import PageResponse
    from kwiki.service.cli_remote import answer, page_path

    with reported():
        settings = load_settings(index_dir=index_dir)

        def in_process() -> PageResponse:
            from kwiki.index.pages import PageStore
            from kwiki.ledger import open_ledger
            from kwiki.service.core import page_view

            return page_view(PageStore.open(settings.index_dir), page_id, open_ledger(settings))

        resp = answer(server_for(settings, url, local),
                      lambda server: PageResponse.model_validate(server.get(page_path(page_id))), in_process)
    if json_out:
        print_json(resp)
        return
    typer.secho(resp.title, bold=True)
    typer.echo(f"{resp.id} [{resp.type}, {resp.confidence or '-'}, {resp.corpus}] {resp.path}")
    typer.echo(resp.body.strip())
    if resp.sources:
        typer.secho("\nsources:", bold=True)
        for s in resp.sources:
            typer.echo(f"  {s.id}: {s.title or ''} {s.url or ''}")
    if resp.artifacts:
        typer.secho("artifacts:", bold=True)
        for a in resp.artifacts:
            typer.echo(f"  {a['path']} ({', '.join(f['local_path'] for f in a.get('files', []))})")


@app.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="Bind address (default 127.0.0.1)")] = None,
    port: Annotated[Optional[int], typer.Option(help="Port (default 8000)")] = None,
    index_dir: IndexDir = None,
    build_if_missing: Annotated[bool, typer.Option("--build-if-missing", help="Ingest the default corpus when no index exists")] = False,
    build: Annotated[Optional[str], typer.Option("--build", help="Serve this published build (`kwiki publish`; default "
                                                 "$KWIKI_BUILD); /health is 503 until it is loaded")] = None,
    builds_dir: BuildsDir = None,
) -> None:
    """Start the HTTP API (OpenAPI at /docs)."""
    import uvicorn

    from kwiki.index.build import current_build

    settings = load_settings(index_dir=index_dir, host=host, port=port, build=build, builds_dir=builds_dir)
    if build_if_missing and settings.build:
        typer.secho("error: --build-if-missing builds the index root's build; a published build (--build) is never built "
                    "here", fg="red", err=True)
        raise typer.Exit(2)
    if build_if_missing and not (current_build(settings.index_dir) / "manifest.json").exists():
        typer.echo(f"no index at {settings.index_dir}: building it from {', '.join(map(str, settings.corpora))}", err=True)
        # In a child process: the build's peak memory (1.1 GB served after an in-process build, 445 MB
        # when started on a built index) goes back to the system when it exits.
        import subprocess

        args = ["ingest", "--index-dir", str(settings.index_dir)] + [a for c in settings.corpora for a in ("--corpus", str(c))]
        done = subprocess.run([sys.executable, "-c", "from kwiki.service.cli import main; main()", *args], check=False)
        if done.returncode != 0:
            raise typer.Exit(done.returncode)
    from kwiki.service.app import create_app
    from kwiki.service.server import server_config

    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"note: serving on {settings.host}, not loopback: put a proxy in front with header, body and idle "
                   "timeouts and a per-client connection limit (README, \"Every request's work is bounded\")", err=True)

    # One worker: the index and model live in this process (see README, "Workers").
    uvicorn.Server(server_config(create_app(settings), settings)).run()


@app.command()
def publish(
    index_dir: IndexDir = None,
    build: Annotated[Optional[str], typer.Option("--build", help="The build of the index root to publish (default: current)")] = None,
    builds_dir: BuildsDir = None,
    list_: Annotated[bool, typer.Option("--list", help="List the published builds instead, oldest first")] = False,
    json_out: JsonOut = False,
) -> None:
    """Publish a build of the index as an immutable artifact that replicas serve by id (`kwiki serve --build ID`)."""
    from kwiki.index.publish import publish as publish_build
    from kwiki.index.publish import published_builds

    settings = load_settings(index_dir=index_dir, builds_dir=builds_dir)
    with reported():
        if list_:
            ids = published_builds(settings.published_dir)
            if json_out:
                print_json({"builds_dir": str(settings.published_dir), "builds": ids})
            else:
                for build_id in ids:
                    typer.echo(build_id)
            return
        done = publish_build(settings.index_dir, settings.published_dir, build)
    if json_out:
        print_json(done)
        return
    what = "already published, checked" if done.already else f"published ({done.files} files, {done.bytes / 2**20:.1f} MiB)"
    typer.echo(f"{done.build_id}: {what}: {done.path}")


@app.command()
def rollout(
    build: Annotated[str, typer.Argument(help="The published build to serve everywhere (rolling back: the old id)")],
    lb_socket: Annotated[Optional[Path], typer.Option("--lb-socket", help="haproxy's admin socket (default $KWIKI_LB_SOCKET)")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="haproxy backend of the replicas (default $KWIKI_LB_BACKEND, kwiki)")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each step of one replica may take")] = 120.0,
    json_out: JsonOut = False,
) -> None:
    """Switch the replicas behind haproxy to a published build, one at a time, each out of rotation while it switches."""
    from kwiki.errors import BadRequest
    from kwiki.service.haproxy import HAProxy
    from kwiki.service.rollout import rollout as roll

    settings = load_settings(lb_socket=lb_socket, lb_backend=backend)
    with reported():
        if settings.lb_socket is None:
            raise BadRequest("no haproxy admin socket given", hint="--lb-socket PATH or KWIKI_LB_SOCKET (haproxy's `stats socket`)")
        done = roll(HAProxy(settings.lb_socket), build, settings.admin_token, backend=settings.lb_backend, timeout_s=timeout,
                    say=lambda line: typer.echo(f"{time.strftime('%H:%M:%S')} {line}", err=True))
    if json_out:
        print_json(done)
        return
    switched = [s.server for s in done.steps if not s.skipped]
    typer.echo(f"{build}: served by every server of '{done.backend}' ({len(switched)} switched, "
               f"{len(done.steps) - len(switched)} already on it) in {done.seconds:.1f} s")


@app.command("eval")
def eval_(
    suite: Annotated[str, typer.Option(help="corpus | kernelwiki | all")] = "all",
    methods: Annotated[str, typer.Option(help="Comma-separated methods (default: all)")] = "",
    kernelwiki: Annotated[Optional[Path], typer.Option(help="KernelWiki checkout for the kernelwiki suite")] = None,
    out: Annotated[Path, typer.Option(help="Folder for report.md, results.json, chart.png")] = Path("evals/runs"),
    update_readme: Annotated[bool, typer.Option("--update-readme", help="Write the tables into evals/README.md")] = False,
    gate: Annotated[bool, typer.Option("--gate", help="Exit 1 when the shipped method falls below evals/floor.yaml")] = False,
    index_dir: IndexDir = None,
    json_out: JsonOut = False,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Ranking parameter NAME=VALUE (kwiki/index/params.py), repeatable")] = None,
    adapter: Annotated[str | None, typer.Option("--adapter", help="Embedding adapter for the suites' indexes ('none': the base model; default: the shipped one)")] = None,
    splits: Annotated[str, typer.Option("--splits", help="Comma-separated question splits to run (dev,test,fresh,real; default: all)")] = "",
    questions: Annotated[str, typer.Option("--questions", help="Comma-separated question files to run, by stem (corpus-blind6,kernelwiki-blind6; default: all)")] = "",
    author_labels: Annotated[bool, typer.Option("--author-labels", help="Score with the authors' labels only, leaving the judged pool out (a new set's first run)")] = False,
) -> None:
    """Measure retrieval quality on the labeled questions (nDCG@10, MRR@10, Recall@5/10, Hit@1)."""
    from rich.console import Console
    from rich.progress import Progress

    from kwiki.evals import command
    from kwiki.evals.runner import METHODS
    from kwiki.index.params import parse_overrides

    settings = load_settings(index_dir=index_dir)
    suites = ["corpus", "kernelwiki"] if suite == "all" else [suite]
    chosen = [m.strip() for m in methods.split(",") if m.strip()] or list(METHODS)
    console = Console(stderr=True)
    plain = not console.is_terminal  # an agent's shell or a log: a line per quarter of each step instead of a bar
    with reported(), Progress(console=console, disable=json_out or plain) as bar:
        tasks: dict[str, Any] = {}
        said: dict[str, int] = {}
        asked: dict[str, int] = {}

        def show(label: str, done: int, total: int) -> None:
            if plain:
                quarter = 4 * done // max(total, 1)
                if said.get(label, -1) < quarter:
                    said[label] = quarter
                    console.print(f"eval {label}: {done}/{total}", markup=False, highlight=False)
                return
            if label not in tasks:
                tasks[label] = bar.add_task(f"eval {label}", total=total)
            bar.update(tasks[label], completed=done, total=total)

        def tick(name: str, total: int) -> None:
            asked[name] = asked.get(name, 0) + 1
            show(f"{name}: searches", asked[name], total)  # questions x methods

        chosen_adapter = settings.embed_adapter if adapter is None else (None if adapter == "none" else adapter)
        result = command.run_eval(suites, chosen, settings.index_dir.parent / "eval", threads=settings.embed_threads,
                                  kernelwiki=kernelwiki, out_dir=out, readme=update_readme, progress=tick,
                                  overrides=parse_overrides(set_ or []), adapter=chosen_adapter,
                                  splits=[s.strip() for s in splits.split(",") if s.strip()] or None,
                                  files=[s.strip() for s in questions.split(",") if s.strip()] or None,
                                  author_labels=author_labels, stage=show)
    failures = command.gate(result) if gate else []
    if json_out:
        print_json({"stamp": result["stamp"], "paths": result["paths"], "gate_failures": failures,
                     "overall": {s: r["overall"] for s, r in result["suites"].items()}})
    else:
        from kwiki.evals.report import table

        for s, res in result["suites"].items():
            shown = next((sp for sp in ("test", "fresh", "real", "dev") if res["overall"] and
                          sp in next(iter(res["overall"].values()))), "all")
            console.print(f"[b]{s}[/b] ({shown} split)" if shown != "all" else f"[b]{s}[/b] (all questions)")
            console.print(table(res, shown), markup=False)
        for k, v in result["paths"].items():
            console.print(f"{k}: {v}")
        for f in failures:
            console.print(f"[red]gate: {f}")
    raise typer.Exit(1 if failures else 0)


@app.command()
def validate(
    corpus: Annotated[Optional[Path], typer.Option("--corpus", "-c", help="Corpus root to check (default: the embedded corpus)")] = None,
    json_out: JsonOut = False,
) -> None:
    """Check a corpus: schema, vocabulary, ids, links, the 'verified' rule, code blocks, artifacts."""
    from kwiki.ingest.validate import validate_corpus
    from kwiki.settings import EMBEDDED_CORPUS

    problems = validate_corpus(corpus or EMBEDDED_CORPUS)  # the package's own copy when installed as a tool
    errors = [p for p in problems if p.level == "error"]
    if json_out:
        print_json([p.__dict__ for p in problems])
    else:
        for p in problems:
            typer.echo(str(p))
        typer.echo(f"{len(errors)} errors, {len(problems) - len(errors)} warnings")
    raise typer.Exit(1 if errors else 0)


def _read_bounded(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` ('-': stdin); a FIFO or device is refused (it would block or never end)."""
    if str(path) == "-":
        return sys.stdin.buffer.read(limit + 1)
    if not path.is_file():
        raise OSError(0, "not a regular file" if path.exists() else "no such file", str(path))
    with open(path, "rb") as fh:
        return fh.read(limit + 1)


@app.command()
def diagnose(
    path: Annotated[Path, typer.Argument(help="ncu export: --page raw --csv, --page details --csv, plain --csv, JSON {metric: value}, .ncu-rep(z); '-' reads stdin")],
    k: Annotated[int, typer.Option("-k", help="Pages per signal")] = PAGES_PER_SIGNAL,
    index_dir: IndexDir = None,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="The parent's export: compare PATH against it")] = None,
    kernel: Annotated[Optional[str], typer.Option("--kernel", help="Only the launches of kernels whose name contains this")] = None,
    source: Annotated[Optional[Path], typer.Option("--source", help="The report's --page source --csv export: add its hotspots")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the first PM-sampling timeline as a PNG chart")] = None,
    record: Annotated[Optional[str], typer.Option("--record", help="Attach the diagnosis to this ledger candidate")] = None,
    candidate: Annotated[Optional[str], typer.Option("--candidate", help="With --baseline: attach the comparison to this ledger candidate")] = None,
    workspace: Annotated[Optional[Path], typer.Option("--workspace", help="Ledger workspace for --record / --candidate")] = None,
    json_out: JsonOut = False,
    url: Url = None,
    local: Local = False,
) -> None:
    """Diagnose an Nsight Compute export: verdict, fired signals, evidence, the next ncu command and the pages that fix
    them (same as POST /diagnose; a running server answers when there is one). With --baseline, compare it with the
    parent's export."""
    from kwiki.errors import BadInput
    from kwiki.profiling.compare import Comparison
    from kwiki.service.cli_profile import print_comparison, print_diagnosis
    from kwiki.service.cli_remote import answer

    settings = load_settings(index_dir=index_dir)
    limit = settings.max_upload_bytes  # the same bound as an upload: /dev/zero is not read for ever
    try:
        data = _read_bounded(path, limit)
        base = _read_bounded(baseline, limit) if baseline is not None else None
        src = _read_bounded(source, limit) if source is not None else None
    except OSError as exc:
        typer.secho(f"error: cannot read {exc.filename or path}: {exc.strerror or exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    for name, got in ((path, data), (baseline, base), (source, src)):
        if got is not None and len(got) > limit:
            typer.secho(f"error: {name} is over the {limit}-byte limit", fg="red", err=True)
            typer.echo("hint: export only the kernels you need (ncu -k NAME -c N); KWIKI_MAX_UPLOAD_BYTES sets the limit", err=True)
            raise typer.Exit(2)
    with reported():
        if candidate and base is None:
            raise BadInput("--candidate attaches a comparison: it needs --baseline", hint="use --record to attach a single diagnosis")

        def in_process() -> DiagnoseResponse | Comparison:
            from kwiki.errors import KwikiError
            from kwiki.service.core import Kwiki

            kw = Kwiki(settings)
            try:
                kw.load()
            except KwikiError as exc:
                typer.echo(f"note: {exc.message}; diagnosing without ranked pages ({exc.hint})", err=True)
            return kw.diagnose(data=data, filename=path.name, k=k, baseline=base,
                               baseline_filename=baseline.name if baseline else "", kernel=kernel, source=src)

        def remote(server: Server) -> DiagnoseResponse | Comparison:
            from kwiki.profiling.diagnose import DiagnoseResponse

            files = {"file": (path.name, data)}
            if base is not None and baseline is not None:
                files["baseline"] = (baseline.name, base)
            if src is not None and source is not None:
                files["source"] = (source.name, src)
            doc = server.upload("/diagnose", files, {"kernel": kernel} if kernel else {}, {"k": k})
            return Comparison.model_validate(doc) if "before" in doc and "verdict" in doc else DiagnoseResponse.model_validate(doc)

        resp = answer(server_for(settings, url, local), remote, in_process)
        if isinstance(resp, Comparison):
            if candidate:
                from kwiki.service.cli_ledger import record_comparison

                record_comparison(candidate, resp, workspace, settings)
        elif record:
            from kwiki.service.cli_ledger import record_diagnosis

            record_diagnosis(record, resp, workspace, settings)
    if plot is not None:
        from kwiki.profiling.charts import write_timeline_png

        launches = resp.after_diagnosis.launches if isinstance(resp, Comparison) and resp.after_diagnosis else getattr(resp, "launches", [])
        timeline = next((d.timeline for d in launches if d.timeline is not None), None)
        if timeline is None:
            typer.echo("note: no PM-sampling timeline in the export (capture with --section PmSampling and export the raw page "
                       "with --print-metric-instances values): no chart written", err=True)
        else:
            write_timeline_png(timeline, plot)
            typer.echo(f"wrote {plot}", err=True)
    if json_out:
        print_json(resp)
    elif isinstance(resp, Comparison):
        print_comparison(resp)
    else:
        print_diagnosis(resp)


@app.command()
def signals(json_out: JsonOut = False, url: Url = None, local: Local = False) -> None:
    """List the NCU signals kwiki evaluates and its metric catalog (same as GET /signals)."""
    from kwiki.service.cli_remote import answer

    def in_process() -> dict[str, Any]:
        from kwiki.service.core import signals_doc

        return signals_doc()

    with reported():
        doc: dict[str, Any] = answer(server_for(load_settings(), url, local), lambda server: server.get("/signals"), in_process)
    if json_out:
        print_json(doc)
        return
    for s in doc["signals"]:
        typer.echo(f"{s['id']:26s} {s.get('title', '')}")
    typer.echo(f"\n{len(doc['metrics'])} metrics in the catalog (kwiki signals --json lists them)")


from kwiki.service.mcp_cli import mcp_command  # noqa: E402 - light module; imports the SDK only when run

app.command("mcp")(mcp_command)


from kwiki.service.cli_ledger import app as ledger_app  # noqa: E402 - light module (typer only at import)

app.add_typer(ledger_app, name="ledger")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
