"""Snippets: the part of a chunk shown under a hit, around the first query term it contains.

    >>> make_snippet("short text", ["text"])
    'short text'
"""

from __future__ import annotations


def matched_terms(text: str, terms: list[str]) -> list[str]:
    """The query terms found in ``text`` (lower-cased terms), at most 12."""
    low = text.lower()
    return [t for t in terms if t in low][:12]


def make_snippet(text: str, terms: list[str], width: int = 320) -> str:
    """Up to ``width`` characters around the first matched term, on word boundaries."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    low = flat.lower()
    positions = [low.find(t) for t in terms if t and low.find(t) >= 0]
    start = max(0, min(positions) - width // 4) if positions else 0
    if start > 0:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    end = min(len(flat), start + width)
    cut = flat[start:end]
    if end < len(flat) and " " in cut[-30:]:
        cut = cut[: cut.rfind(" ")]
    return ("… " if start > 0 else "") + cut + (" …" if end < len(flat) else "")
