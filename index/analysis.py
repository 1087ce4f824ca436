"""Text analysis shared by indexing and querying, so both see the same tokens.

Two analyzers: ``prose`` (simple tokenizer, lowercase, English stemmer) and
``ident``, whose tokenizer keeps identifiers whole::

    >>> ident_tokens("stall smsp__pcsamp_warps_issue_stalled_long_scoreboard on sm_90a, cp.async.bulk")
    ['smsp__pcsamp_warps_issue_stalled_long_scoreboard', 'sm_90a', 'cp.async.bulk']
"""

from __future__ import annotations

import re
from functools import lru_cache

import tantivy

PROSE = "kw_prose"
IDENT = "kw_ident"
_IDENT_RE = r"[A-Za-z0-9_]+(?:(?:\.|::?)[A-Za-z0-9_]+)*"
_IDENTLIKE = re.compile(r"[_.:]|[a-z][0-9]|[0-9][a-z]")

#: Query words that carry no meaning for retrieval (documents keep them).
STOPWORDS = frozenset(
    """a an and are as at be but by can do does for from had has have how i if in into is it its me my of on or
    our so than that the their them then there these they this to too was we what when where which while who why
    will with you your very just get got about all any some much many most only our out over up down""".split()
)


@lru_cache(maxsize=None)
def prose_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


@lru_cache(maxsize=None)
def ident_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(_IDENT_RE))
        .filter(tantivy.Filter.remove_long(120))
        .filter(tantivy.Filter.lowercase())
        .build()
    )


def register(index: tantivy.Index) -> None:
    """Register kwiki's analyzers on an index (needed on every open)."""
    index.register_tokenizer(PROSE, prose_analyzer())
    index.register_tokenizer(IDENT, ident_analyzer())


def prose_tokens(text: str, drop_stopwords: bool = False) -> list[str]:
    if drop_stopwords:
        words = [w for w in re.findall(r"[A-Za-z0-9]+", text) if w.lower() not in STOPWORDS]
        text = " ".join(words)
    return list(prose_analyzer().analyze(text))


def ident_tokens(text: str) -> list[str]:
    """Identifier-like tokens only (they contain ``_``, ``.``, ``:`` or mix letters and digits)."""
    return [t for t in ident_analyzer().analyze(text) if _IDENTLIKE.search(t)]
