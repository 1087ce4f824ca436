"""A real haproxy in front of 3 real `kwiki serve` replicas on loopback: 50 clients search without pause while
`kwiki rollout` switches the fleet to a new published build and back. No request fails, and once a rollout has
returned no response comes from the build it replaced (by each response's X-Kwiki-Build header)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from ..conftest import free_port
from ..robustness.conftest import cli_env, kwiki_cmd

pytestmark = pytest.mark.slow

TOKEN = "fleet-rollout-token"
#: A well-formed build id that nothing published: a rollout to it must stop at the first replica, changing nothing.
UNPUBLISHED = "20990101T000000-00000000"
CLIENTS = 50
REPLICAS = 3
QUERIES = ["only a few SMs are busy at the end", "tensor memory", "tail effect", "TMEM allocation", "persistent kernel"]


def _haproxy() -> str | None:
    return shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(p, os.X_OK)), None)


def _wait(what: str, done, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def fleet(builds, tmp_path):
    """3 replicas serving the old build, haproxy in front: (frontend url, HAProxy client, replica urls)."""
    binary = _haproxy()
    if binary is None:
        pytest.skip("haproxy not found (PATH, /usr/sbin): `apt-get install -y haproxy` (Debian's package, as .ci/run does)")
    from kwiki.service.haproxy import HAProxy, config

    env = cli_env() | {"KWIKI_ADMIN_TOKEN": TOKEN, "KWIKI_BUILDS_DIR": str(builds.store), "KWIKI_BUILD": builds.old,
                       "KWIKI_INDEX_DIR": str(builds.index_dir), "KWIKI_EMBED_THREADS": "1"}
    procs: list[subprocess.Popen] = []
    short: Path | None = None
    ports = [free_port() for _ in range(REPLICAS)]
    try:
        for n, port in enumerate(ports):
            log = open(tmp_path / f"replica-{n}.log", "wb")
            procs.append(subprocess.Popen(kwiki_cmd("serve", "--port", str(port)), env=env, stdout=log, stderr=subprocess.STDOUT))
        short = Path(tempfile.mkdtemp(prefix="kwfleet-"))  # a unix socket's path has at most 107 bytes
        sock, front = short / "haproxy.sock", free_port()
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(config(front, [(f"r{n + 1}", f"127.0.0.1:{p}") for n, p in enumerate(ports)], sock))
        procs.append(subprocess.Popen([binary, "-f", str(cfg), "-db"], stdout=open(tmp_path / "haproxy.log", "wb"),
                                      stderr=subprocess.STDOUT))
        lb = HAProxy(sock)

        def all_up() -> bool:
            assert all(p.poll() is None for p in procs), "a replica or haproxy exited: " + " ".join(
                (tmp_path / f).read_text(errors="replace")[-1500:] for f in os.listdir(tmp_path) if f.endswith(".log"))
            try:
                return sum(s.up for s in lb.servers()) == REPLICAS
            except Exception:  # noqa: BLE001 - haproxy still starting
                return False

        _wait("3 replicas UP in haproxy", all_up, timeout=180)
        yield f"http://127.0.0.1:{front}", lb, [f"http://127.0.0.1:{p}" for p in ports], sock
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if short is not None:
            shutil.rmtree(short, ignore_errors=True)


def _rollout(build: str, sock: Path) -> dict:
    done = subprocess.run(kwiki_cmd("rollout", build, "--lb-socket", str(sock), "--json", "--timeout", "90"),
                          env=cli_env() | {"KWIKI_ADMIN_TOKEN": TOKEN}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_rolling_out_and_back_under_50_clients_fails_nothing_and_leaves_no_old_build(builds, fleet):
    front, lb, replicas, sock = fleet
    stop = threading.Event()
    lock = threading.Lock()
    # (sent at, build of the X-Kwiki-Build header): a request sent after a rollout has completed must reach a
    # reloaded replica; the time a thread reads its answer is no bound (50 threads on 2 cores wait for the GIL)
    answers: list[tuple[float, str]] = []
    failures: list[str] = []

    def client(n: int) -> None:
        with httpx.Client(base_url=front, timeout=60) as c:
            i = n
            while not stop.is_set():
                i += 1
                sent = time.monotonic()
                try:
                    r = c.get("/search", params={"q": QUERIES[i % len(QUERIES)], "k": 5})
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                with lock:
                    if r.status_code != 200 or not r.json()["hits"]:
                        failures.append(f"{r.status_code}: {r.text[:200]}")
                    elif r.headers.get("x-kwiki-build") != r.json()["index"]["build_id"]:
                        failures.append(f"header {r.headers.get('x-kwiki-build')} != body {r.json()['index']['build_id']}")
                    else:
                        answers.append((sent, r.headers["x-kwiki-build"]))

    def answered_after(t: float) -> int:
        with lock:
            return sum(1 for at, _ in answers if at > t)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    try:
        _wait("answers before the rollout", lambda: answered_after(0) >= 100 or bool(failures))
        out_started = time.monotonic()
        out = _rollout(builds.new, sock)
        out_done = time.monotonic()
        _wait("answers after the rollout", lambda: answered_after(out_done) >= 100 or bool(failures))
        back_started = time.monotonic()
        back = _rollout(builds.old, sock)
        back_done = time.monotonic()
        _wait("answers after the rollback", lambda: answered_after(back_done) >= 100 or bool(failures))
        # a build the replicas cannot load: the first replica is put back on its build, the rollout stops there
        refused = subprocess.run(kwiki_cmd("rollout", UNPUBLISHED, "--lb-socket", str(sock), "--timeout", "90"),
                                 env=cli_env() | {"KWIKI_ADMIN_TOKEN": TOKEN}, capture_output=True, text=True, timeout=300)
        refused_done = time.monotonic()
        _wait("answers after the refused rollout", lambda: answered_after(refused_done) >= 50 or bool(failures))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)

    print(f"{len(answers)} answers; rollout {out['seconds']} s, rollback {back['seconds']} s; steps "
          f"{[(s['drain_s'], s['reload_s'], s['back_s']) for s in out['steps']]}")
    assert not failures, f"{len(failures)} failed requests, e.g. {failures[:3]}"
    for done in (out, back):
        assert [s["server"] for s in done["steps"]] == ["r1", "r2", "r3"] and not any(s["skipped"] for s in done["steps"])
    assert [s["before"] for s in out["steps"]] == [builds.old] * 3 and [s["after"] for s in back["steps"]] == [builds.old] * 3
    during = {b for at, b in answers if out_started < at < out_done}
    after_out = {b for at, b in answers if out_done < at < back_started}
    after_back = {b for at, b in answers if at > back_done}
    assert after_out == {builds.new}, f"after the rollout to {builds.new}: {after_out}"
    assert after_back == {builds.old}, f"after the rollback to {builds.old}: {after_back}"
    assert builds.old in {b for at, b in answers if at < out_started} and during <= {builds.old, builds.new}
    assert refused.returncode == 2 and f"error: r1 refused build {UNPUBLISHED}: 404" in refused.stderr, refused.stderr[-2000:]
    assert "r1: could not switch; back in rotation" in refused.stderr and "r2" not in refused.stderr
    assert {b for at, b in answers if at > back_done} == {builds.old}
    assert all(httpx.get(f"{url}/health").json()["build"] == builds.old for url in replicas)
    assert sum(s.up for s in lb.servers()) == REPLICAS  # every replica back in rotation
