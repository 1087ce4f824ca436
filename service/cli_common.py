"""What every CLI command shares: settings, kwiki errors as exit status 2, JSON output.

    >>> with reported():                                       # doctest: +SKIP
    ...     resp = Searcher.open(settings.index_dir).page(page_id)
    >>> print_json(resp)                                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import typer

if TYPE_CHECKING:
    from kwiki.settings import Settings


def settings(index_dir: Path | None = None, **overrides: Any) -> Settings:
    """The one Settings object, with command-line overrides (None = not given)."""
    from pydantic import ValidationError

    from kwiki.settings import Settings

    values = {k: v for k, v in overrides.items() if v is not None}
    if index_dir is not None:
        values["index_dir"] = index_dir
    try:
        return Settings(**values)
    except ValidationError as exc:  # a bad KWIKI_* variable: say which and what is expected, not a traceback
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


def print_json(doc: Any) -> None:
    """A pydantic model or a plain document, as the HTTP API would return it."""
    text = doc.model_dump_json(indent=2) if hasattr(doc, "model_dump_json") else json.dumps(doc, indent=2, default=str)
    sys.stdout.write(text + "\n")
