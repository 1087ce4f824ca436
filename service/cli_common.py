"""What every CLI command shares: kwiki errors as exit status 2, JSON output, the ``--url`` / ``--local`` choice.

    >>> with reported():                                       # doctest: +SKIP
    ...     resp = Searcher.open(load_settings().index_dir).page(page_id)
    >>> print_json(resp)                                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Optional

import typer

if TYPE_CHECKING:
    from kwiki.settings import Settings

    from .cli_remote import Server

IndexDir = Annotated[Optional[Path], typer.Option("--index-dir", help="Index root (default: $KWIKI_INDEX_DIR or .kwiki/index)")]
BuildsDir = Annotated[Optional[Path], typer.Option("--builds-dir", help="The store of published builds (default: "
                                                   "$KWIKI_BUILDS_DIR or <index dir>/published)")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON (the same document the HTTP API returns)")]
#: The commands that ask a running server (service/cli_remote.py says how it is found).
Url = Annotated[Optional[str], typer.Option("--url", help="Ask this kwiki server (default: $KWIKI_URL, else the one at "
                                            "KWIKI_HOST:KWIKI_PORT when it serves the local index's build)")]
Local = Annotated[bool, typer.Option("--local", help="Answer in process, even when a server is running")]


def load_settings(**overrides: Any) -> Settings:
    """:func:`kwiki.settings.load_settings` for a command: a bad ``KWIKI_*`` variable is an error line naming it
    and exit status 2, not a traceback."""
    from pydantic import ValidationError

    from kwiki import settings

    try:
        return settings.load_settings(**overrides)
    except ValidationError as exc:
        for e in exc.errors()[:5]:
            name = "KWIKI_" + "_".join(str(p) for p in e["loc"][:1]).upper()
            typer.secho(f"error: {name}: {e['msg'].removeprefix('Value error, ')}", fg="red", err=True)
        raise typer.Exit(2) from None


@contextmanager
def reported() -> Iterator[None]:
    """A kwiki error becomes ``error: ...`` and ``hint: ...`` on stderr and exit status 2; any other
    exception is a bug and propagates with its traceback."""
    from kwiki.errors import KwikiError

    try:
        yield
    except KwikiError as exc:
        typer.secho(f"error: {exc.message}", fg="red", err=True)
        if exc.hint:
            typer.echo(f"hint: {exc.hint}", err=True)
        raise typer.Exit(2) from None


def server_for(settings: Settings, url: str | None, local: bool) -> Server | None:
    """The server to ask (:func:`kwiki.service.cli_remote.find_server`), or None: answer in process."""
    from .cli_remote import find_server

    return find_server(settings, url, local)


def print_json(doc: Any) -> None:
    """A pydantic model or a plain document, as the HTTP API would return it."""
    text = doc.model_dump_json(indent=2) if hasattr(doc, "model_dump_json") else json.dumps(doc, indent=2, default=str)
    sys.stdout.write(text + "\n")
