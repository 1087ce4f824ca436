"""Issue 20, High 1-2 and Medium 9: a diagnosis costs a bounded amount of work whatever the upload holds.

Each test replays an attack of the issue on loopback or in process. The bounds asserted are counts and
sizes (regex repeats, launches, warnings, searches, traced memory), never wall-clock time.
"""

from __future__ import annotations

import gzip
import re
import tracemalloc
from re import _constants as sre_constants  # the public sre_* aliases are deprecated
from re import _parser as sre_parse
from types import SimpleNamespace

import httpx
import pytest

from kwiki.errors import BadInput, RequestTimeout
from kwiki.profiling import diagnose, messages
from kwiki.profiling.diagnose import diagnose_metrics, diagnose_text
from kwiki.profiling.ncu_csv import MAX_LAUNCHES, MAX_WARNINGS, parse_bytes
from kwiki.service.diagnosis import TOP_SIGNALS_WITH_PAGES, diagnose_request

from ..conftest import ServerThread

RAW_HEADER = "ID,Kernel Name,gpu__time_duration.sum,launch__grid_size,launch__sm_count\n,,nsecond,,\n"
#: The largest repeat count any pattern applied to uploaded text may have.
MAX_REPEAT = 1000


def _max_repeat(parsed: sre_parse.SubPattern) -> int:
    """The largest repeat bound in a parsed pattern (``sre_constants.MAXREPEAT`` when one is unbounded)."""
    worst = 0
    for op, arg in parsed:
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT):
            lo, hi, sub = arg
            worst = max(worst, hi, _max_repeat(sub))
        elif op == sre_constants.SUBPATTERN:
            worst = max(worst, _max_repeat(arg[-1]))
        elif op == sre_constants.BRANCH:
            worst = max([worst, *(_max_repeat(b) for b in arg[1])])
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            worst = max(worst, _max_repeat(arg[1]))
    return worst


def _patterns(module) -> dict[str, re.Pattern[str]]:
    out = {}
    for name, value in vars(module).items():
        if isinstance(value, re.Pattern):
            out[name] = value
        elif isinstance(value, list):
            out.update({f"{name}[{i}]": v[0] for i, v in enumerate(value) if isinstance(v, tuple) and isinstance(v[0], re.Pattern)})
    return out


#: Patterns of profiling/ with an unbounded repeat, each with the bound on the text it is ever applied to.
BOUNDED_BY_INPUT = {
    "inputs._NUM": "parse_number refuses strings over 64 characters first",
    "routing._METRIC_RE": "route() reads at most routing.MAX_CHARS (4,000) characters",
    "routing._SMS_BUSY": "route() reads at most routing.MAX_CHARS (4,000) characters",
    "routing._WORD": "signals.yaml phrases only, never request text",
    "hotspots._EXIT_OPS": "anchored, one SASS instruction at a time",
    "hotspots._WRITE_OPS": "anchored, one SASS instruction at a time",
    "hotspots._ATOMIC_OPS": "anchored, one SASS instruction at a time",
}


def _profiling_modules():
    import importlib
    import pkgutil

    import kwiki.profiling

    return [importlib.import_module(f"kwiki.profiling.{m.name}") for m in pkgutil.iter_modules(kwiki.profiling.__path__)]


def test_every_pattern_on_uploaded_text_has_bounded_repeats():
    """`_PAIR`'s unbounded `[a-z0-9_.]+` made `"a__." * 8000` cost 10 s; the rescans are gone when no repeat is unbounded.
    A pattern that needs one must say here what bounds the text it reads."""
    checked = 0
    for module in _profiling_modules():
        for name, pat in _patterns(module).items():
            key = f"{module.__name__.rsplit('.', 1)[-1]}.{name}"
            checked += 1
            if key not in BOUNDED_BY_INPUT:
                assert _max_repeat(sre_parse.parse(pat.pattern, pat.flags)) <= MAX_REPEAT, f"{key} has an unbounded repeat"
    assert checked > 20 and {diagnose._PAIR, diagnose._LINE} <= set(_patterns(diagnose).values()) and _patterns(messages)


@pytest.mark.parametrize("text", [
    "a__." * 8000,                       # the 32 KiB request that froze the server for 10 s
    "a__." * 60_000,                     # 240 KB: would have taken minutes
    "\n" * 40_000 + "x",                 # 40,000 newlines (the `^\s*"?ID"?,` scan with re.M)
    (" " * 200 + "\n") * 2_000,
    ("1" * 3_990 + "\n\n") * 12,         # long digit runs inside rule messages (`([\d.]+) ?- ?way`)
    "sm__x " + "1" * 100_000 + "!",
])
def test_hostile_pasted_text_is_answered(text):
    resp = diagnose_text(text)
    assert resp.launches == [] and resp.format == "text"


def test_pasted_text_still_reads_pairs_and_console_lines():
    resp = diagnose_text("launch__grid_size = 32, launch__sm_count=132\n  DRAM Throughput        %       92.51\n")
    assert resp.launches[0].key_metrics == {"grid_size": 32.0, "dram_throughput_pct": 92.51}


def _traced_peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        try:
            out = fn()
        except BadInput as exc:
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_gzip_of_millions_of_short_rows_stays_small():
    """A 28 KiB gzip of 3.3M short rows drove the server to 4.58 GiB; reading stops at the launch cap."""
    rows = "1\n" * 3_300_000
    upload = gzip.compress((RAW_HEADER + rows).encode(), 9)
    assert len(upload) < 64 * 1024
    out, peak = _traced_peak(lambda: parse_bytes(upload, "x.csv.gz", max_bytes=20 << 20))
    assert isinstance(out, BadInput)  # no row has a number
    assert peak < 32 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"  # the 6.6 MB text and its decode, nothing per row


def test_short_rows_give_one_counted_warning():
    """A 19 MiB CSV answered 1.75M warnings; now one line with a count."""
    body = RAW_HEADER + "".join(f"{i},k,{1000 + i}\n" for i in range(5000))
    res = parse_bytes(body.encode(), "x.csv")
    assert len(res.profiles) == MAX_LAUNCHES
    assert len(res.warnings) <= MAX_WARNINGS
    assert any(str(MAX_LAUNCHES) in w for w in res.warnings)
    assert any(w.startswith(f"{MAX_LAUNCHES} rows have fewer") for w in res.warnings)


def test_details_export_stops_at_the_launch_cap():
    header = "ID,Kernel Name,Section Name,Metric Name,Metric Unit,Metric Value,Rule Name,Rule Type,Rule Description\n"
    rows = "".join(f'{i},k,SOL,Duration,nsecond,{i + 1},R{j},OPT,"text"\n' for i in range(MAX_LAUNCHES + 50) for j in range(2))
    rule_rows = "".join(f'0,k,SOL,,,,R{j},OPT,"one more rule"\n' for j in range(500))
    res = parse_bytes((header + rule_rows + rows).encode(), "d.csv")
    assert len(res.profiles) == MAX_LAUNCHES
    assert max(len(p.rules) for p in res.profiles) <= 100


def _counting(searcher, monkeypatch, before=None):
    """The real searcher, each search it runs recorded (and ``before`` called first)."""
    queries: list[str] = []
    real = searcher.search

    def search(q, *args, **kwargs):
        if before is not None:
            before()
        queries.append(q)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(searcher, "search", search)
    return queries


def test_many_launches_search_once_per_signal(searcher, monkeypatch):
    """1,000 launches of one kernel ran 3 searches per launch (37.6 s of CPU); pages are now looked up once per signal."""
    body = RAW_HEADER + "".join(f"{i},k,{5_000_000 + i},32,132\n" for i in range(MAX_LAUNCHES))
    queries = _counting(searcher, monkeypatch)
    resp = diagnose_request(data=body.encode(), filename="x.csv", searcher=searcher)
    assert len(resp.launches) == MAX_LAUNCHES
    distinct = {s.signal for d in resp.launches for s in d.signals[:TOP_SIGNALS_WITH_PAGES]}
    assert len(queries) == len(distinct) <= TOP_SIGNALS_WITH_PAGES + 2
    assert resp.launches[0].signals[0].pages == resp.launches[-1].signals[0].pages


def test_diagnosis_stops_at_its_deadline(searcher, monkeypatch):
    """Injected slowness: each search advances a fake clock by 10 s; with a 5 s deadline the diagnosis stops
    right after the first search with a 503 timeout instead of running on in its thread."""
    clock = SimpleNamespace(now=100.0)
    fake_time = SimpleNamespace(monotonic=lambda: clock.now, perf_counter=lambda: clock.now)
    monkeypatch.setattr(diagnose, "time", fake_time)
    queries = _counting(searcher, monkeypatch, before=lambda: setattr(clock, "now", clock.now + 10.0))
    rows = "".join(f"{i},k{i % 50},{5_000_000 + i},{32 + i % 7},132\n" for i in range(MAX_LAUNCHES))
    with pytest.raises(RequestTimeout):
        diagnose_request(data=(RAW_HEADER + rows).encode(), filename="x.csv", searcher=searcher, deadline=clock.now + 5)
    assert len(queries) == 1


@pytest.mark.parametrize("metrics", [
    {"launch__grid_size": 10**400},                                   # float() overflow
    {"metrics": {"launch__grid_size": 32}, "rules": 5},               # not a list
    {"metrics": {"launch__grid_size": 32}, "rules": [{"name": "x", "speedup": 10**400}]},
    {"launch__grid_size": "1" * 100_000 + "!"},
])
def test_odd_metric_values_are_not_errors(metrics):
    try:
        diagnose_metrics(metrics)
    except BadInput:
        pass  # a clear 400 is fine; anything else is the 500 of the issue


@pytest.mark.parametrize("text", [
    "represents about 1.2.3% of the total average. The stall type represents scoreboard dependency on a L1TEX",
    "execute only 4 blocks, which is less than the GPU's 0 multiprocessors",
])
def test_odd_numbers_in_rule_messages_are_not_errors(text):
    diagnose_text(text)


# ------------------------------------------------------------------ over HTTP, no index needed
@pytest.fixture(scope="module")
def bare_server(tmp_path_factory):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    settings = Settings(index_dir=tmp_path_factory.mktemp("no-index"), max_upload_bytes=1 << 20)
    with ServerThread(create_app(settings)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(bare_server):
    with httpx.Client(base_url=bare_server.url, timeout=120) as c:
        yield c


def _bad(r: httpx.Response) -> dict:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    assert "Traceback" not in r.text
    return r.json()["error"]


def test_http_quadratic_text_is_answered(client):
    r = client.post("/diagnose", json={"text": "a__." * 8000})
    assert r.status_code == 200 and r.json()["launches"] == []
    assert client.get("/health").status_code == 503  # no index here, but the server answers


@pytest.mark.parametrize("body", [
    b'{"metrics": {"launch__grid_size": ' + b"9" * 400 + b"}}",
    b'{"metrics": {"metrics": {"launch__grid_size": 32}, "rules": 5}}',
    b'{"metrics": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"metrics": {"metrics": {"launch__grid_size": 32}, "kernel": "\\ud800"}}',  # was a 500 when the answer was encoded
    b'{"metrics": {"\\udfff": 1, "launch__grid_size": 32}}',
])
def test_http_odd_json_is_4xx(client, body):
    r = client.post("/diagnose", content=body, headers={"content-type": "application/json"})
    if r.status_code != 200:
        _bad(r)


@pytest.mark.parametrize("damage", ["deflate", "crc", "truncated"])
def test_http_corrupt_gzip_is_400(client, damage):
    good = bytearray(gzip.compress((RAW_HEADER + "0,k,1000,32,132\n" * 200).encode()))
    if damage == "deflate":
        good[10:20] = b"\xff" * 10
    elif damage == "crc":
        good[-8:-4] = b"\x00\x00\x00\x00"
    else:
        good = good[: len(good) // 2]
    r = client.post("/diagnose", files={"file": ("x.csv.gz", bytes(good))})
    assert "gzip" in _bad(r)["message"]


def test_http_upload_of_short_rows_is_small(client):
    upload = gzip.compress((RAW_HEADER + "1\n" * 300_000 + "0,k,1000,32,132\n").encode(), 9)
    r = client.post("/diagnose", files={"file": ("x.csv.gz", upload)})
    assert "no launch rows" in _bad(r)["message"]  # the first 1,000 rows are all there is to read
    assert len(r.content) < 2_000


def test_comparison_has_the_same_deadline():
    from kwiki.profiling.compare import compare_bytes

    body = (RAW_HEADER + "0,k,1000,32,132\n").encode()
    with pytest.raises(RequestTimeout):
        compare_bytes(body, "before.csv", body, "after.csv", deadline=0.0)  # long passed: stops before any launch
    assert compare_bytes(body, "before.csv", body, "after.csv").kernels  # and without one it compares


def test_source_page_exit_lines_are_one_pass(monkeypatch):
    """Each exit line searched back through every earlier line (quadratic in a source page's lines); now the
    write-op pattern is tried once per instruction, whatever the number of lines."""
    from kwiki.profiling import hotspots

    calls = [0]
    real = hotspots._WRITE_OPS

    class Counting:
        def search(self, s: str):
            calls[0] += 1
            return real.search(s)

    monkeypatch.setattr(hotspots, "_WRITE_OPS", Counting())
    lines = []
    for i in range(2000):
        ln = hotspots._Line("k.cu", "kernel", i, None, "x")
        ln.sass = ["STG.E [R2], R5"] if i == 0 else ["EXIT"]
        ln.samples, ln.stalls = 10.0, {"drain": 9.0}
        lines.append(ln)
    hotspots._move_exit_drain(lines)
    assert calls[0] <= len(lines)
    assert lines[0].samples == 10.0 * 2000 and len(lines[0].moved_from) == 1999  # every drain moved to the one store


def test_source_page_of_millions_of_rows_stops_at_its_cap():
    """A source page is read up to MAX_SOURCE_ROWS rows (each distinct address was a line object, for ever)."""
    from kwiki.profiling import hotspots

    head = '"Kernel Name","k"\n"Address","Source","Warp Stall Sampling (All Samples)","stall_drain"\n'
    upload = gzip.compress((head + "".join(f'"0x{i:x}","EXIT","1","1"\n' for i in range(hotspots.MAX_SOURCE_ROWS + 5000))).encode())
    out, peak = _traced_peak(lambda: hotspots.parse_source_page(upload))
    assert any(f"more than {hotspots.MAX_SOURCE_ROWS} rows" in w for w in out.warnings)
    assert peak < 400 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


def test_timelines_are_read_for_the_launches_a_diagnosis_reads():
    from kwiki.profiling.timeline import parse_timelines

    head = 'ID,Kernel Name,"pmsampling:sm__warps_active.avg",profiler__pmsampler_interval_time\n,,%,ns\n'
    rows = "".join(f'{i},k,"(1;2;3;4;5;6;7;8;9;10;0;0)",1000\n' for i in range(MAX_LAUNCHES + 500))
    assert len(parse_timelines((head + rows).encode())) == MAX_LAUNCHES  # every row read is a timeline; the rest unread
