"""What every CLI command shares: kwiki errors as exit status 2, JSON output.

    >>> with reported():                                       # doctest: +SKIP
    ...     resp = Searcher.open(load_settings().index_dir).page(page_id)
    >>> print_json(resp)                                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import typer


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
