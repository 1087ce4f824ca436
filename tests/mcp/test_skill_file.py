"""SKILL.md cannot drift: an agent following it blind must find every command working as written.

Every command of its fenced ``bash`` blocks is run, in the order the file gives them, from a fresh directory
(not the checkout), against an index that the file's own ``kwiki ingest`` builds in a temp dir; each
``# expect: PATH == VALUE`` line under a command is checked against the command's JSON output. Blocks are
tagged by what their commands are:

* ``bash``: run as written (curl against the server the file starts);
* ``bash background``: servers (``kwiki serve``, ``kwiki mcp``, ``kwiki mcp --http``): started as written, checked
  to answer (``/health``; an MCP session listing the tools the file names), kept up for the commands after them;
* ``bash ncu``: Nsight Compute is not on this machine, so these are parsed instead: every option must be one
  ``ncu --help`` documents (Nsight Compute 2025.3.1, the version the fixtures were captured with), with a
  documented value; a capture (``-o NAME``) must leave the clocks alone and write ``NAME.ncu-rep``; an export
  must read a report captured above with ``--import NAME.ncu-rep`` and write CSV (``--csv``) to a file. The file
  each export writes is then put in place from the real H200 exports under ``profiling/fixtures/`` (the capture
  named ``t01`` is the tail-effect kernel, ``t02`` its fix), for the kwiki commands that read it.

Inline commands in the prose (`` `kwiki page ID` ``, `` `ncu --import NAME.ncu-rep --csv` ``) are checked too: a
kwiki command and its options must exist (``--help``), an ncu command must parse as documented.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from ..conftest import DATA, REPO, free_port

SKILL = REPO / "SKILL.md"
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
_EXPECT = re.compile(r"^#\s*expect:\s*(\S+)\s*==\s*(.+?)\s*$")
_INLINE = re.compile(r"(?<!`)`((?:kwiki|ncu) [^`\n]+)`(?!`)")
VERIFY = REPO / "profiling" / "fixtures" / "verify"
#: SKILL.md's capture names -> the fixture stem of the real export that stands for them
CAPTURES = {"t01": "tail_effect-bad", "t02": "tail_effect-fixed"}
#: exports SKILL.md reads without capturing them in a block (a worked example): file -> fixture
EXPORTS = {"gemm.raw.csv": VERIFY / "torch-gemm_bf16.raw.csv.gz"}
KINDS = ("run", "background", "ncu")


@dataclass
class Command:
    line: str
    kind: str
    expects: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return self.line[:70]


def skill_commands(text: str | None = None) -> list[Command]:
    out: list[Command] = []
    for info, body in _FENCE.findall(text if text is not None else SKILL.read_text(encoding="utf-8")):
        words = info.split()
        if not words or words[0] != "bash":
            continue
        kind = words[1] if len(words) > 1 else "run"
        assert kind in KINDS, f"SKILL.md: a ```bash block is tagged {kind!r}; the test knows {KINDS}"
        for raw in body.splitlines():
            line = raw.strip()
            if not line:
                continue
            m = _EXPECT.match(line)
            if m:
                assert out and out[-1].kind == "run", f"'{line}' follows no command that is run"
                out[-1].expects.append((m.group(1), m.group(2)))
            elif not line.startswith("#"):
                out.append(Command(line, kind))
    return out


COMMANDS = skill_commands()


def lookup(doc, path: str):
    """``hits[0].id`` -> doc["hits"][0]["id"]."""
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        doc = doc[int(token[1:-1])] if token.startswith("[") else doc[token]
    return doc


# --------------------------------------------------------------------------- ncu, as `ncu --help` documents it
#: Options of `ncu --help` (Nsight Compute 2025.3.1) that SKILL.md may use: name -> allowed values, None for any
#: value, () for a flag without one. Aliases map to their long name. corpus/sources/docs/doc-nsight-compute-cli.md
#: and profiling/fixtures/capture.sh (run on the H200) use the same.
NCU_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "--export": None, "--force-overwrite": (), "--import": None, "--csv": (),
    "--page": ("details", "raw", "source", "session"),
    "--print-source": ("sass", "ptx", "cuda", "cuda,sass"),
    "--print-units": ("auto", "base"), "--print-metric-instances": ("none", "values", "details"),
    "--print-details": ("header", "body", "all"), "--print-metric-name": ("label", "name", "label-name"),
    "--set": None, "--section": None, "--metrics": None, "--kernel-name": None,
    "--kernel-name-base": ("function", "demangled", "mangled"), "--kernel-id": None,
    "--launch-count": None, "--launch-skip": None, "--launch-skip-before-match": None,
    "--clock-control": ("base", "none", "reset"), "--cache-control": ("all", "none"),
    "--import-source": ("on", "off", "yes", "no"), "--replay-mode": ("kernel", "application", "range", "app-range"),
    "--profile-from-start": ("on", "off", "yes", "no"), "--nvtx": (), "--nvtx-include": None, "--nvtx-exclude": None,
    "--target-processes": ("application-only", "all"), "--devices": None,
}
NCU_ALIASES = {"-o": "--export", "-f": "--force-overwrite", "-i": "--import", "-k": "--kernel-name",
               "-c": "--launch-count", "-s": "--launch-skip"}
NCU_COUNTS = ("--launch-count", "--launch-skip", "--launch-skip-before-match")
NCU_REPEATABLE = ("--section", "--nvtx-include", "--nvtx-exclude")


@dataclass
class NcuLine:
    options: dict[str, list[str]]
    program: list[str]
    output: str | None

    def one(self, name: str) -> str | None:
        return self.options.get(name, [None])[-1]


def parse_ncu(line: str) -> NcuLine:
    """One ``ncu`` command line, checked against :data:`NCU_OPTIONS`; raises AssertionError on a mistake."""
    head, sep, redirect = line.partition(" > ")
    args = shlex.split(head)
    assert args and args[0] == "ncu", line
    options: dict[str, list[str]] = {}
    i = 1
    while i < len(args) and args[i].startswith("-"):
        name, eq, value = args[i].partition("=")
        name = NCU_ALIASES.get(name, name)
        assert name in NCU_OPTIONS, f"`ncu --help` documents no option {args[i]!r}: {line}"
        allowed = NCU_OPTIONS[name]
        if allowed == ():
            assert not eq, f"{name} takes no value: {line}"
        else:
            if not eq:
                i += 1
                assert i < len(args), f"{name} needs a value: {line}"
                value = args[i]
            assert allowed is None or value in allowed, f"{name} {value!r}: ncu takes one of {allowed}: {line}"
            if name in NCU_COUNTS:
                assert value.isdigit(), f"{name} takes a count: {line}"
        assert name not in options or name in NCU_REPEATABLE, f"{name} given twice: {line}"
        options.setdefault(name, []).append(value)
        i += 1
    out = shlex.split(redirect) if sep else []
    assert len(out) <= 1, f"one output file after '>': {line}"
    return NcuLine(options, args[i:], out[0] if out else None)


def check_ncu_block(commands: list[Command], cwd: Path | None = None) -> list[str]:
    """The capture and export lines in order: each capture writes a report, each export reads one and writes a
    CSV; with ``cwd``, the fixture that stands for each export is put there. Returns the files written."""
    reports: dict[str, str] = {}  # NAME.ncu-rep -> capture name
    written = []
    for cmd in commands:
        p = parse_ncu(cmd.line)
        name = p.one("--export")
        if name is not None:  # a capture: profile a program into a report
            assert p.program and not p.output and "--import" not in p.options, cmd.line
            assert not name.endswith((".ncu-rep", ".ncu-repz", ".csv")), f"-o NAME writes NAME.ncu-rep: {cmd.line}"
            assert p.one("--clock-control") == "none", f"a capture leaves the clocks alone (--clock-control none): {cmd.line}"
            assert "--csv" not in p.options, f"-o writes a binary report; CSV comes from --import: {cmd.line}"
            reports[f"{name}.ncu-rep"] = name
            continue
        report = p.one("--import")
        assert report is not None and not p.program, f"an export reads a report: ncu --import NAME.ncu-rep: {cmd.line}"
        assert report in reports, f"{report} is no report captured above (-o NAME writes NAME.ncu-rep): {cmd.line}"
        page = p.one("--page") or "details"
        assert "--csv" in p.options and p.output, f"an export writes CSV to a file: --csv ... > FILE: {cmd.line}"
        if "--print-source" in p.options:
            assert page == "source", f"--print-source goes with --page source: {cmd.line}"
        if page == "source":
            assert p.one("--print-source") in ("cuda,sass", "sass"), f"hotspots need SASS: --print-source cuda,sass: {cmd.line}"
        if "--print-metric-instances" in p.options:
            assert page == "raw", f"--print-metric-instances goes with --page raw: {cmd.line}"
        if cwd is not None:
            stem = CAPTURES[reports[report]]
            kind = "rawinst" if p.one("--print-metric-instances") == "values" else page
            src = DATA / "ncu" / f"{stem}.details.csv" if page == "details" else VERIFY / f"{stem}.{kind}.csv.gz"
            assert src.is_file(), f"no fixture {src} for {cmd.line}"
            data = src.read_bytes()
            (cwd / p.output).write_bytes(gzip.decompress(data) if src.suffix == ".gz" else data)
        written.append(p.output)
    return written


# --------------------------------------------------------------------------- running the file
def _env(index: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWIKI_")}
    return {**env, "KWIKI_INDEX_DIR": str(index), "HF_HUB_OFFLINE": "1", "KWIKI_EMBED_THREADS": "1",
            "KWIKI_PORT": str(port), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def _wait_port(port: int, proc: subprocess.Popen, log: Path, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}: {log.read_text()[-3000:]}"
            time.sleep(0.2)


def _mcp_tools(target) -> set[str]:
    import anyio
    from mcp import Client

    names: set[str] = set()

    async def scenario() -> None:
        async with Client(target, read_timeout_seconds=300) as c:
            names.update(t.name for t in (await c.list_tools()).tools)

    anyio.run(scenario)
    return names


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str
    note: str = ""


@pytest.fixture(scope="module")
def skill_run(tmp_path_factory, corpus_index, embed_cache):
    """Every command of SKILL.md, run in order from a fresh directory; ``{line: Outcome}``."""
    from mcp import StdioServerParameters

    cwd = tmp_path_factory.mktemp("skill-cwd")
    index = tmp_path_factory.mktemp("skill-index")
    shutil.copytree(embed_cache, index / "cache")  # the chunks are embedded once per test session
    port, mcp_port = free_port(), free_port()
    env = _env(index, port)
    url = f"http://127.0.0.1:{port}"
    for name, src in EXPORTS.items():
        (cwd / name).write_bytes(gzip.decompress(src.read_bytes()))
    results: dict[str, Outcome] = {}
    procs: list[tuple[subprocess.Popen, object]] = []
    ncu_block: list[Command] = []
    try:
        for cmd in COMMANDS:
            if cmd.kind == "ncu":
                ncu_block.append(cmd)
                try:
                    check_ncu_block(ncu_block, cwd)
                    results[cmd.line] = Outcome(0, "", "")
                except AssertionError as exc:
                    results[cmd.line] = Outcome(1, "", str(exc))
                continue
            args = shlex.split(cmd.line)
            if cmd.kind == "background":
                log_path = cwd / f"bg-{len(procs)}.log"
                if args[:2] == ["kwiki", "mcp"] and "--http" not in args:
                    tools = _mcp_tools(StdioServerParameters(command=shutil.which("kwiki") or "kwiki", args=args[1:],
                                                             env=env, cwd=str(cwd)))
                    results[cmd.line] = Outcome(0, json.dumps(sorted(tools)), "")
                    continue
                args = [str(mcp_port) if a == "8765" else str(port) if a == "8000" else a for a in args]
                log = open(log_path, "w")
                proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
                procs.append((proc, log))
                if "--http" in args:
                    _wait_port(mcp_port, proc, log_path)
                    tools = _mcp_tools(f"http://127.0.0.1:{mcp_port}/mcp")
                    results[cmd.line] = Outcome(0, json.dumps(sorted(tools)), "")
                    proc.terminate()
                else:
                    _wait_port(port, proc, log_path)
                    health = httpx.get(f"{url}/health", timeout=60)
                    results[cmd.line] = Outcome(0 if health.status_code == 200 else 1, health.text, "")
                continue
            line = cmd.line.replace("http://127.0.0.1:8000", url)
            out = subprocess.run(line, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
            results[cmd.line] = Outcome(out.returncode, out.stdout, out.stderr)
            if " > " in line and out.returncode == 0:  # the output went to a file: it is the output to check
                target = cwd / shlex.split(line.partition(" > ")[2])[0]
                results[cmd.line].stdout = target.read_text() if target.is_file() else ""
        yield results
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()  # type: ignore[attr-defined]


def test_frontmatter():
    text = SKILL.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n", 2)[1])
    assert meta["name"] == "kwiki"
    assert 100 < len(meta["description"]) <= 1024  # what agents read to decide whether to load the skill
    tools = meta["allowed-tools"]
    assert "Bash(kwiki:*)" in tools and "Bash(ncu:*)" in tools
    for section in ("When to use it", "When not to use it", "Capture a profile with Nsight Compute",
                    "The ledger loop", "MCP tools", "Reading results", "Worked examples"):
        assert f"## {section}" in text
    assert sum(c.kind == "run" for c in COMMANDS) >= 20 and sum(bool(c.expects) for c in COMMANDS) >= 15
    assert any(c.kind == "ncu" for c in COMMANDS) and any(c.kind == "background" for c in COMMANDS)


def test_every_mcp_tool_is_allowed_and_described():
    """The MCP server's tools, as it lists them, are the ones SKILL.md allows and tabulates."""
    from kwiki.service.mcp_server import build_server
    from kwiki.settings import Settings

    text = SKILL.read_text(encoding="utf-8")
    allowed = yaml.safe_load(text.split("---\n", 2)[1])["allowed-tools"]
    names = {t.name for t in build_server(Settings())._tool_manager.list_tools()}  # noqa: SLF001
    assert {f"mcp__kwiki__{n}" for n in names} == {t.strip() for t in allowed.split(",") if t.strip().startswith("mcp__")}
    table = text[text.index("## MCP tools"):text.index("## Reading results")]
    assert all(f"`{n}`" in table for n in names)


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.kind == "ncu"], ids=str)
def test_ncu_command_is_documented_syntax(cmd):
    block = [c for c in COMMANDS if c.kind == "ncu"]
    check_ncu_block(block[:block.index(cmd) + 1])


def test_ncu_checker_refuses_what_the_old_skill_said():
    """The capture line SKILL.md used to show (``--csv -o profile.csv`` writes a binary report, not a CSV), and other
    mistakes, fail the check."""
    wrong = ["ncu --set full --page raw --csv -o profile.csv ./app",
             "ncu --set full -o t01 ./app",  # clocks locked to base
             "ncu --set full --clock-control off -o t01 ./app",
             "ncu --sets full --clock-control none -o t01 ./app",
             "ncu --clock-control none -c one -o t01 ./app"]
    for line in wrong:
        with pytest.raises(AssertionError):
            check_ncu_block([Command(line, "ncu")])
    capture = Command("ncu --set full --clock-control none -o t01 ./app", "ncu")
    for line in ["ncu --import t02.ncu-rep --page raw --csv > t02.raw.csv",  # no such report captured
                 "ncu --import t01 --page raw --csv > t01.raw.csv",  # the file is t01.ncu-rep
                 "ncu --import t01.ncu-rep --page raw > t01.raw.csv",  # not CSV
                 "ncu --import t01.ncu-rep --page source --csv > t01.source.csv",  # SASS view needed for hotspots
                 "ncu --import t01.ncu-rep --page raw --csv --print-source sass > t01.raw.csv"]:
        with pytest.raises(AssertionError):
            check_ncu_block([capture, Command(line, "ncu")])


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.kind != "ncu"], ids=str)
def test_command_runs_and_answers_as_documented(cmd, skill_run):
    assert cmd.line.startswith(("kwiki ", "curl ")), f"SKILL.md commands are kwiki, ncu or curl: {cmd.line}"
    out = skill_run[cmd.line]
    assert out.rc == 0, f"{cmd.line}\n{out.stderr[-3000:]}"
    assert out.stdout.strip(), f"{cmd.line} printed nothing\n{out.stderr[-2000:]}"
    if cmd.kind == "background":
        if cmd.line.startswith("kwiki mcp"):
            table = SKILL.read_text(encoding="utf-8").split("## MCP tools")[1].split("## ")[0]
            named = set(re.findall(r"`(\w+)`", table))
            assert named & set(json.loads(out.stdout)) and {"search", "ledger_add", "compare"} <= set(json.loads(out.stdout))
        return
    if "--json" in cmd.line or cmd.line.startswith("curl "):
        doc = json.loads(out.stdout)
        assert not (isinstance(doc, dict) and "error" in doc), doc
        for path, want in cmd.expects:
            got = lookup(doc, path)
            assert str(got).lower() == want.lower(), f"{cmd.line}: {path} is {got!r}, SKILL.md says {want!r}"
    else:
        assert not cmd.expects, "expectations need --json output"


def _help(args: list[str]) -> str:
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    out = subprocess.run([exe, *args, "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, f"kwiki {' '.join(args)}: {out.stderr}"
    return out.stdout


INLINE = sorted(set(_INLINE.findall(SKILL.read_text(encoding="utf-8"))))


def test_the_prose_names_commands():
    assert any(c.startswith("kwiki ") for c in INLINE) and any(c.startswith("ncu ") for c in INLINE)


@pytest.mark.parametrize("line", INLINE)
def test_inline_command_exists_with_its_options(line):
    args = shlex.split(line)
    if args[0] == "ncu":
        parse_ncu(line)
        return
    groups = {"ledger"}  # subcommand groups: their command is the next word
    path = args[1:3] if args[1] in groups and len(args) > 2 and not args[2].startswith("-") else args[1:2]
    if path == ["--version"]:
        return
    text = _help(path)
    for opt in (a.split("=")[0] for a in args[1 + len(path):] if a.startswith("--")):
        assert opt in text, f"kwiki {' '.join(path)} has no option {opt}"
