"""haproxy in front of kwiki replicas: the configuration it runs with, and its runtime API (the admin socket).

``kwiki rollout`` takes replicas out of rotation and puts them back through the runtime API, so haproxy never sends
a request to a replica that is switching builds; its health check (``GET /health``, 200 only when the replica serves
the build it was told to) keeps out one that is not ready anyway. :func:`config` writes the configuration the fleet
test and ``benchmarks/fleet.py`` run, and the one ``docs`` and the README describe::

    lb = HAProxy(Path("/run/haproxy/admin.sock"))
    [s.name for s in lb.servers("kwiki")]        # ['r1', 'r2', 'r3']
    lb.set_state("kwiki", "r1", "drain")         # no new requests; those in flight finish

Only the standard library: the admin socket speaks one line of text per connection.
"""

from __future__ import annotations

import csv
import io
import socket
from dataclasses import dataclass
from pathlib import Path

from kwiki.errors import LoadBalancerError

#: The backend name :func:`config` gives the replicas (``KWIKI_LB_BACKEND`` defaults to it).
BACKEND = "kwiki"
#: Server admin states the runtime API sets: in rotation, no new requests, out (no health checks either).
STATES = ("ready", "drain", "maint")


@dataclass(frozen=True)
class Server:
    """One server line of a backend, as ``show stat`` reports it."""

    name: str
    address: str  # host:port
    status: str  # UP, DOWN, DRAIN, MAINT, "UP 1/2", "no check", ...
    sessions: int  # requests being served (scur)
    queued: int  # requests waiting for it in haproxy (qcur)

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def up(self) -> bool:
        """In rotation: its health check passes and it is neither drained nor in maintenance."""
        return self.status == "UP"


class HAProxy:
    """A client of haproxy's runtime API on a unix socket (``stats socket PATH level admin``)."""

    def __init__(self, socket_path: Path, timeout_s: float = 5.0) -> None:
        self.socket_path = Path(socket_path)
        self.timeout_s = timeout_s

    def command(self, line: str) -> str:
        """Send one command, return haproxy's whole answer."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout_s)
                sock.connect(str(self.socket_path))
                sock.sendall(line.encode() + b"\n")
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
        except OSError as exc:
            raise LoadBalancerError(f"haproxy's admin socket {self.socket_path} does not answer: {exc}",
                                    hint="haproxy's global section needs `stats socket PATH mode 600 level admin`") from None
        return b"".join(chunks).decode(errors="replace")

    def servers(self, backend: str = BACKEND) -> list[Server]:
        """The servers of ``backend`` in configuration order (``show stat``)."""
        text = self.command("show stat")
        rows = list(csv.DictReader(io.StringIO(text.lstrip("# "))))
        found = [Server(name=r["svname"], address=r.get("addr") or "", status=r["status"], sessions=int(r["scur"] or 0),
                        queued=int(r["qcur"] or 0))
                 for r in rows if r.get("pxname") == backend and r.get("svname") not in ("FRONTEND", "BACKEND")]
        if not found:
            known = sorted({r["pxname"] for r in rows if r.get("svname") == "BACKEND"})
            raise LoadBalancerError(f"haproxy has no backend '{backend}' with servers",
                                    hint=f"backends: {', '.join(known) or 'none'} (--backend, KWIKI_LB_BACKEND)")
        return found

    def server(self, backend: str, name: str) -> Server:
        for s in self.servers(backend):
            if s.name == name:
                return s
        raise LoadBalancerError(f"haproxy backend '{backend}' has no server '{name}'")

    def set_state(self, backend: str, name: str, state: str) -> None:
        """``set server BACKEND/NAME state ready|drain|maint``; haproxy's refusal is an error."""
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}")
        answer = self.command(f"set server {backend}/{name} state {state}").strip()
        if answer:  # silence is success
            raise LoadBalancerError(f"haproxy refused `set server {backend}/{name} state {state}`: {answer[:200]}")


def config(port: int, servers: list[tuple[str, str]], socket_path: Path, backend: str = BACKEND, host: str = "127.0.0.1") -> str:
    """An haproxy configuration: ``host:port`` balanced over ``servers`` ((name, host:port), least connections first),
    health-checked on ``/health`` every 500 ms, and the admin socket for ``kwiki rollout``.

    A request is retried on another replica when a connection fails or a kept-alive connection is closed under it
    (``retry-on``, ``option redispatch``): a client never sees the race between a replica closing an idle connection
    and haproxy reusing it. Timeouts bound the client side as the README's limits ask of a proxy.
    """
    lines = [
        "global",
        f"    stats socket {socket_path} mode 600 level admin",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 30s",
        "    timeout server 30s",
        "    timeout queue 30s",
        "    timeout http-request 10s",
        "    timeout http-keep-alive 5s",
        "    retries 3",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response junk-response response-timeout",
        f"frontend {backend}_in",
        f"    bind {host}:{port}",
        f"    default_backend {backend}",
        f"backend {backend}",
        "    balance leastconn",
        "    option httpchk",
        "    http-check send meth GET uri /health",
        "    http-check expect status 200",
        "    default-server inter 500ms fastinter 250ms fall 2 rise 1",
        *(f"    server {name} {address} check" for name, address in servers),
    ]
    return "\n".join(lines) + "\n"
