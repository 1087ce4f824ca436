"""Tolerant YAML frontmatter parsing.

KernelWiki pages carry quoted and unquoted dates, flow and block lists, folded
scalars, titles with colons and fields nobody declared. Parsing keeps all of it,
turns dates into ISO strings and refuses only what cannot be a page header::

    >>> meta, body, body_line = split_frontmatter("---\\nid: x\\ndate: 2025-01-02\\n---\\n# Hi\\n")
    >>> meta["date"], body_line
    ('2025-01-02', 5)
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import yaml

#: More aliases than this in one header is treated as a YAML bomb.
MAX_ALIASES = 64
MAX_DEPTH = 32
#: Values a document may expand to once aliases are followed (a page header has a few dozen).
MAX_NODES = 100_000
#: YAML text parsed at all (KernelWiki's largest header is 7 KB, its largest PROVENANCE.yaml 22 KB): a 1.2M-item
#: list took 60 s to parse before the node count could refuse it, so the size is checked before any node is built.
MAX_YAML_CHARS = 256 * 1024
#: Nodes composed, aliases not followed (the largest PROVENANCE.yaml has about 1,500): counted while parsing, so
#: a long plain list stops early and is reported as long, not as a bomb.
MAX_COMPOSED_NODES = 20_000


class FrontmatterError(ValueError):
    """The header exists but cannot be used; the message says why."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps dates as ISO strings and refuses alias bombs."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise FrontmatterError(f"more than {MAX_ALIASES} YAML aliases (alias-expansion bomb?)")
        else:
            self._nodes += 1  # counted as composed, so a long plain list stops here and is not called a bomb
            if self._nodes > MAX_COMPOSED_NODES:
                raise FrontmatterError(f"YAML has more than {MAX_COMPOSED_NODES} values")
        return super().compose_node(parent, index)


def _iso(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    value = yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    return value.isoformat() if isinstance(value, (_dt.date, _dt.datetime)) else str(value)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _iso)
# Values a page must be able to store as JSON: !!binary stays base64 text, !!set becomes a list.
_Loader.add_constructor("tag:yaml.org,2002:binary", lambda loader, node: str(loader.construct_scalar(node)).strip())
_Loader.add_constructor("tag:yaml.org,2002:set", lambda loader, node: [str(k) for k in loader.construct_mapping(node)])


def _check_shape(value: Any) -> None:
    """Refuse a parsed document nested deeper than MAX_DEPTH or expanding to more than MAX_NODES values.

    Aliases share one object per anchor, so a few dozen of them can stand for 2**30 values
    (``a1: &a1 [*a0, *a0]``, ...): anything that walks or serializes the result would hang. The
    walk is memoized per object, so it costs the number of distinct nodes, and it ends on cycles
    (a recursive anchor) because the depth is bounded.
    """
    memo: dict[int, tuple[int, int]] = {}  # id(container) -> (expanded size, height)

    def walk(v: Any, level: int) -> tuple[int, int]:
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, (list, tuple, set, frozenset)):
            children = v
        else:
            return 1, 0
        known = memo.get(id(v))
        if known is None:
            if level >= MAX_DEPTH:
                raise FrontmatterError(f"frontmatter nested deeper than {MAX_DEPTH} levels")
            size, height = 1, 0
            for child in children:
                s, h = walk(child, level + 1)
                size, height = size + s, max(height, h + 1)
                if size > MAX_NODES:
                    raise FrontmatterError(f"YAML expands to more than {MAX_NODES} values (alias-expansion bomb?)")
            known = memo[id(v)] = (size, height)
        if level + known[1] > MAX_DEPTH:
            raise FrontmatterError(f"frontmatter nested deeper than {MAX_DEPTH} levels")
        return known

    walk(value, 0)


def parse_yaml(text: str) -> Any:
    """Parse YAML with the guarded loader (also used for ``data/*.yaml`` and PROVENANCE files)."""
    if len(text) > MAX_YAML_CHARS:
        raise FrontmatterError(f"YAML is {len(text) // 1024} KiB, over the {MAX_YAML_CHARS // 1024} KiB limit")
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
        _check_shape(data)
        return data
    except FrontmatterError:
        raise
    except RecursionError as exc:
        raise FrontmatterError("YAML nested too deeply") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontmatterError(f"malformed YAML{where}: {problem}") from exc


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, int]:
    """Split a page into (frontmatter mapping, body, 1-based line where the body starts).

    A page without a ``---`` header gets an empty mapping. Raises :class:`FrontmatterError`
    when the header is malformed, is not a mapping, or is a bomb.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            header = "\n".join(lines[1:i])
            body = "\n".join(lines[i + 1 :])
            meta = parse_yaml(header) if header.strip() else {}
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                raise FrontmatterError(f"frontmatter is a {type(meta).__name__}, not a mapping of fields")
            return {str(k): v for k, v in meta.items()}, body, i + 2
    raise FrontmatterError("frontmatter opened with '---' but never closed")


def as_list(value: Any) -> list[str]:
    """Normalize a facet value: ``None`` -> [], ``"a, b"`` -> ["a", "b"], [1, "x"] -> ["1", "x"]."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")] if "," in value else [value.strip()]
        return [p for p in parts if p]
    if isinstance(value, (list, tuple, set)):
        out: list[str] = []
        for item in value:
            if item is None:
                continue
            if isinstance(item, (dict, list)):
                continue
            out.append(str(item).strip())
        return [o for o in out if o]
    return [str(value)]
