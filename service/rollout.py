"""A rollout: every replica behind haproxy switched to one published build, one replica at a time, none of them
answering while it switches.

For each server of the backend, in order (``kwiki rollout BUILD``; rolling back is the same command with the old id):

1. skip it if it already serves ``BUILD`` and is in rotation (a rollout that stopped half-way is resumed by running
   it again);
2. refuse to go on unless another server is in rotation (taking out the last one would drop requests);
3. ``drain`` it in haproxy (no new requests) and wait until the requests it holds and those queued for it are done;
4. ``POST /admin/reload {"build": BUILD}`` on the replica itself, then wait until its ``/health`` is 200 with that build;
5. put it back (``ready``) and wait until haproxy reports it ``UP`` before the next one.

If a replica cannot switch (the build is not published there, a damaged copy, a time-out), it is reloaded to the
build it served and put back, and the rollout stops with :class:`~kwiki.errors.RolloutFailed`: the replicas not
reached yet keep their build, and running the rollout again (or back) settles the fleet.

It lives in ``service/`` as a ``kwiki`` command rather than a script under ``benchmarks/``: it is an operator's
tool with the settings (``KWIKI_ADMIN_TOKEN``, the admin socket) and the error reporting of every other command,
and the fleet test runs the real command.
"""

from __future__ import annotations

import time
from typing import Callable

import httpx
from pydantic import BaseModel

from kwiki.errors import KwikiError, RolloutFailed

from .haproxy import HAProxy, Server

#: How often the rollout polls haproxy and the replica.
POLL_S = 0.1


class Step(BaseModel):
    """What the rollout did to one replica."""

    server: str
    address: str
    before: str | None  # the build it served
    after: str | None
    skipped: bool = False  # it already served the build
    drain_s: float = 0.0  # until its last request was done
    reload_s: float = 0.0  # until /health was 200 with the new build
    back_s: float = 0.0  # until haproxy had it UP again


class Rollout(BaseModel):
    build: str
    backend: str
    steps: list[Step]
    seconds: float


def _health(client: httpx.Client, server: Server) -> tuple[int, dict]:
    try:
        r = client.get(f"{server.url}/health")
        return r.status_code, r.json()
    except (httpx.HTTPError, ValueError):
        return 0, {}


def _serves(client: httpx.Client, server: Server, build: str) -> bool:
    code, doc = _health(client, server)
    return code == 200 and doc.get("build") == build


def _wait(what: str, done: Callable[[], bool], timeout_s: float, server: Server) -> float:
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout_s:
            raise RolloutFailed(f"{server.name} ({server.address}): {what} did not happen within {timeout_s:.0f} s",
                                hint="see the replica's log; the replicas not reached yet keep their build")
        time.sleep(POLL_S)
    return round(time.monotonic() - started, 3)


def rollout(lb: HAProxy, build: str, token: str | None, *, backend: str, timeout_s: float = 120.0,
            say: Callable[[str], None] = lambda _: None) -> Rollout:
    """Switch every server of ``backend`` to published build ``build``, one at a time (the module's steps)."""
    if not token:
        raise RolloutFailed("a rollout needs the replicas' admin token", hint="set KWIKI_ADMIN_TOKEN (the replicas' token)")
    started = time.monotonic()
    steps: list[Step] = []
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=timeout_s) as client:
        for server in lb.servers(backend):
            code, doc = _health(client, server)
            before = doc.get("build")
            if code == 200 and before == build and server.up:
                say(f"{server.name}: already serves {build}")
                steps.append(Step(server=server.name, address=server.address, before=before, after=build, skipped=True))
                continue
            others = [s.name for s in lb.servers(backend) if s.name != server.name and s.up]
            if not others:
                raise RolloutFailed(f"{server.name} is the only server of '{backend}' in rotation: taking it out would drop requests",
                                    hint="start another replica first (a rollout needs two), or wait until the others are UP")
            step = Step(server=server.name, address=server.address, before=before, after=None)
            say(f"{server.name}: drain (serving {before})")
            lb.set_state(backend, server.name, "drain")
            step.drain_s = _wait("draining", lambda: (s := lb.server(backend, server.name)).sessions == 0 and s.queued == 0,
                                 timeout_s, server)
            t0 = time.monotonic()
            try:
                r = client.post(f"{server.url}/admin/reload", json={"build": build}, headers=auth)
                if r.status_code != 200:
                    err = (r.json() if r.headers.get("content-type", "").startswith("application/json") else {}).get("error", {})
                    raise RolloutFailed(f"{server.name} refused build {build}: {r.status_code} {err.get('message', r.text[:200])}",
                                        hint=err.get("hint") or "publish the build where the replicas read it (`kwiki publish`)")
                _wait(f"/health 200 with build {build}", lambda: _serves(client, server, build), timeout_s, server)
            except (KwikiError, httpx.HTTPError) as exc:
                _restore(lb, client, server, backend, before, auth, say)
                if isinstance(exc, KwikiError):
                    raise
                raise RolloutFailed(f"{server.name}: reload failed: {exc}", hint="see the replica's log") from None
            step.reload_s = round(time.monotonic() - t0, 3)
            lb.set_state(backend, server.name, "ready")
            step.back_s = _wait("back UP in haproxy", lambda: lb.server(backend, server.name).up, timeout_s, server)
            step.after = build
            say(f"{server.name}: serves {build} (drained {step.drain_s:.2f} s, reloaded {step.reload_s:.2f} s, "
                f"UP after {step.back_s:.2f} s)")
            steps.append(step)
    return Rollout(build=build, backend=backend, steps=steps, seconds=round(time.monotonic() - started, 3))


def _restore(lb: HAProxy, client: httpx.Client, server: Server, backend: str, before: str | None, auth: dict[str, str],
             say: Callable[[str], None]) -> None:
    """Put a replica that could not switch back on the build it served, and back in rotation when it is ready."""
    if before:
        try:
            client.post(f"{server.url}/admin/reload", json={"build": before}, headers=auth)
        except httpx.HTTPError:
            pass
    if _health(client, server)[0] == 200:
        lb.set_state(backend, server.name, "ready")
        say(f"{server.name}: could not switch; back in rotation on {before}")
    else:
        say(f"{server.name}: could not switch and is not ready: left out of rotation (drained)")
