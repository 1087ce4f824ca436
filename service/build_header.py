"""``X-Kwiki-Build`` on every response: the id of the build that answered it.

A client, a load balancer's log or a rollout test can tell which build answered each request, not only the
``index.build_id`` of a search's body. The id is the build the request's work was handed
(:data:`kwiki.service.core.answering_builds`, appended to by ``Kwiki.get``), so a request that started on the old
build during a reload says the old build even if the new one is served by the time it answers; a response that
needed no index (``/health``, ``/signals``, an error before any search) names the build served when it started.
With no build loaded there is no header.

    app.add_middleware(BuildHeader, state=kwiki_state)      # outermost: it labels the 413s and 400s too
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core import answering_builds
from .limits import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from .core import Kwiki

#: The response header (lower case, as ASGI sends headers).
HEADER = b"x-kwiki-build"


class BuildHeader:
    """Pure ASGI middleware: adds :data:`HEADER` to every HTTP response."""

    def __init__(self, app: ASGIApp, state: Kwiki) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered: list[str] = []
        started_on = self.state.build_id
        token = answering_builds.set(answered)

        async def labelled(message: Message) -> None:
            if message["type"] == "http.response.start":
                build = answered[0] if answered else started_on
                if build:
                    message = dict(message, headers=[*message.get("headers", []), (HEADER, build.encode("ascii", "replace"))])
            await send(message)

        try:
            await self.app(scope, receive, labelled)
        finally:
            answering_builds.reset(token)
