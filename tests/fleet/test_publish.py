"""Published builds are immutable artifacts a replica serves by id, and /health tells whether it serves the one it
was told to: real builds of the mini corpus, the real app in process."""

from __future__ import annotations

import json
import shutil
import stat

import numpy as np
import pytest
from fastapi.testclient import TestClient

from kwiki.errors import BuildDamaged, BuildNotFound
from kwiki.index.publish import CHECKSUMS, open_published, publish, published_builds, verify

TOKEN = "fleet-test-token"


def _cli(*args: str):
    from ..robustness.conftest import run_cli

    return run_cli(*args)


def _client(builds, embedder, build: str | None):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=builds.index_dir, builds_dir=builds.store, build=build, admin_token=TOKEN))
    app.state.kwiki.embedder = embedder  # the session's model, not a second copy
    return TestClient(app, raise_server_exceptions=False)


def test_a_published_build_is_complete_read_only_checked_and_published_once(builds):
    assert published_builds(builds.store) == sorted([builds.old, builds.new])
    folder = open_published(builds.store, builds.new)
    listed = {line.split("  ", 1)[1] for line in (folder / CHECKSUMS).read_text().splitlines()}
    assert {"manifest.json", "pages.jsonl", "vectors/chunks.npy", "vectors/sentences.npy"} <= listed
    assert all(not (folder / name).stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) for name in listed)
    again = publish(builds.index_dir, builds.store, builds.new)
    assert again.already and again.build_id == builds.new
    assert published_builds(builds.store) == sorted([builds.old, builds.new])  # no second copy, no .partial left


def test_a_changed_missing_or_added_file_makes_a_published_build_refused(builds, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(builds.store / builds.old, store / builds.old)
    folder = store / builds.old
    verify(folder)
    pages = folder / "pages.jsonl"
    pages.chmod(0o644)
    data = pages.read_bytes()
    pages.write_bytes(data[:-2] + bytes([data[-2] ^ 1]) + data[-1:])  # one bit of one byte
    with pytest.raises(BuildDamaged, match="pages.jsonl does not match its checksum"):
        open_published(store, builds.old)
    pages.write_bytes(data)
    (folder / "vectors" / "extra.npy").write_bytes(b"x")
    with pytest.raises(BuildDamaged, match="which its checksums do not list"):
        open_published(store, builds.old)
    (folder / "vectors" / "extra.npy").unlink()
    (folder / "vocab.json").unlink()
    with pytest.raises(BuildDamaged, match="lacks vocab.json"):
        open_published(store, builds.old)
    with pytest.raises(BuildNotFound, match="not published"):
        open_published(store, builds.new)
    for bad in ("../index", "a/b", f"{builds.old}.partial", ""):
        with pytest.raises(BuildNotFound, match="is not a build id"):
            open_published(store, bad)


def test_a_replica_serves_its_build_memory_mapped_and_labels_every_response(builds, embedder):
    with _client(builds, embedder, builds.old) as client:
        searcher = client.app.state.kwiki.searcher
        assert isinstance(searcher.vindex.matrix, np.memmap) and isinstance(searcher.vindex.sentences, np.memmap)
        health = client.get("/health")
        assert health.status_code == 200
        assert health.json()["ready"] is True and health.json()["build"] == builds.old == health.json()["expected_build"]
        r = client.get("/search", params={"q": "only a few SMs busy near the end of the kernel", "k": 3})
        assert r.status_code == 200 and r.json()["hits"][0]["id"] == "pattern-mini-tail"
        assert r.headers["x-kwiki-build"] == builds.old == r.json()["index"]["build_id"]
        for path in ("/health", "/signals", "/pages/pattern-mini-tail", "/pages/no-such-page", "/search?qq=1", "/nowhere"):
            assert client.get(path).headers["x-kwiki-build"] == builds.old, path
        assert client.post("/search", content=b"x" * (21 * 2**20)).headers["x-kwiki-build"] == builds.old  # the 413 too
    verify(builds.store / builds.old)  # serving it wrote nothing into it


def test_a_replica_told_to_serve_a_build_it_cannot_load_is_not_ready(builds, embedder):
    with _client(builds, embedder, "20990101T000000-00000000") as client:
        health = client.get("/health")
        assert health.status_code == 503
        body = health.json()
        assert body["status"] == "not_ready" and body["ready"] is False and body["build"] is None
        assert body["error"]["code"] == "build_not_loaded" and "20990101T000000-00000000" in body["error"]["message"]
        assert "not published" in body["error"]["message"] and "kwiki publish" in body["error"]["hint"]
        assert "x-kwiki-build" not in health.headers  # no build answered
        assert client.get("/search", params={"q": "tail"}).status_code == 503


def test_reload_to_a_build_switches_and_a_failed_one_leaves_it_serving_but_not_ready(builds, embedder):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with _client(builds, embedder, builds.old) as client:
        assert client.post("/admin/reload", json={"build": builds.new}).status_code == 401  # no token given
        r = client.post("/admin/reload", json={"build": builds.new}, headers=auth)
        assert r.status_code == 200 and r.json()["build"] == builds.new == r.json()["expected_build"]
        assert client.get("/health").json()["build"] == builds.new
        hit = client.get("/search", params={"q": "rollout marker", "k": 3})
        assert hit.headers["x-kwiki-build"] == builds.new and hit.json()["hits"][0]["id"] == "pattern-fleet-added"
        missing = client.post("/admin/reload", json={"build": "20990101T000000-00000000"}, headers=auth)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "build_not_found"
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["error"]["code"] == "build_not_loaded"
        assert health.json()["build"] == builds.new  # it still answers, from the build it had
        assert client.get("/search", params={"q": "tail"}).headers["x-kwiki-build"] == builds.new
        back = client.post("/admin/reload", json={"build": builds.old}, headers=auth)  # rolling back is the same
        assert back.status_code == 200 and client.get("/health").json()["build"] == builds.old
        assert client.post("/admin/reload", headers=auth).json()["build"] == builds.old  # no body: the expected build


def test_kwiki_publish_from_the_command_line(builds, tmp_path):
    store = str(tmp_path / "store")
    first = _cli("publish", "--index-dir", str(builds.index_dir), "--builds-dir", store, "--json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["build_id"] == builds.new and not doc["already"] and doc["files"] > 10  # `current`: the newest build
    again = _cli("publish", "--index-dir", str(builds.index_dir), "--builds-dir", store, "--build", builds.old)
    assert again.returncode == 0 and f"{builds.old}: published" in again.stdout
    listed = _cli("publish", "--builds-dir", store, "--list")
    assert builds.old < builds.new  # ids sort by age, also for two builds of one second
    assert listed.stdout.split() == [builds.old, builds.new]
    missing = _cli("publish", "--index-dir", str(builds.index_dir), "--builds-dir", store, "--build", "20990101T000000-00000000")
    assert missing.returncode == 2 and "error: build 20990101T000000-00000000 is not in" in missing.stderr
    assert f"hint: the index keeps its last builds: {builds.old}" in missing.stderr and "Traceback" not in missing.stderr
