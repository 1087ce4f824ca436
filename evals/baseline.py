"""KernelWiki's own keyword scoring, re-implemented from its ``scripts/query.py``.

Per whitespace token, case-insensitive substring matching: +10 when the token is in the frontmatter
title, +5 when it is in a tag field (``tags``, ``techniques``, ``hardware_features``, ``kernel_types``,
``languages``, ``aliases``, ``symptoms``), + min(occurrences in the body, 3). A token that is a variant
in the corpus' ``data/aliases.yaml`` is also tried as its canonical term, and the better of the two
scores counts. Ties are broken by path. Page-level aliases are not expansions there, only tag text.

    >>> KeywordBaseline(pages, {"tcgen05": ["UMMA"]}).search("UMMA tile", k=10)
"""

from __future__ import annotations

from kwiki.ingest.models import Page

TAG_FIELDS = ("tags", "techniques", "hardware_features", "kernel_types", "languages", "aliases", "symptoms")


def _tag_text(meta: dict) -> str:
    # Like the original, a field's value is iterated as given: a bare string contributes its characters.
    return " ".join(str(v) for k in TAG_FIELDS for v in (meta.get(k) or [])).lower()


class KeywordBaseline:
    def __init__(self, pages: dict[str, Page], aliases: dict[str, list[str]]) -> None:
        """``aliases``: canonical -> variants, in the order of ``data/aliases.yaml``."""
        self.pages = list(pages.values())
        self.canonical: dict[str, str] = {}  # lower-cased variant or canonical -> lower-cased canonical
        for canonical, variants in aliases.items():
            for v in (canonical, *variants):
                self.canonical.setdefault(str(v).lower(), str(canonical).lower())
        self._title = [str(p.meta.get("title", "")).lower() for p in self.pages]
        self._tags = [_tag_text(p.meta) for p in self.pages]
        self._body = [p.body.lower() for p in self.pages]

    def variants(self, token: str) -> list[str]:
        token = token.lower()
        canonical = self.canonical.get(token)
        return [token, canonical] if canonical and canonical != token else [token]

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        expanded = [self.variants(t) for t in query.split()]
        scored = []
        for i, page in enumerate(self.pages):
            score = 0
            for variants in expanded:
                best = 0
                for t in variants:
                    s = (10 if t in self._title[i] else 0) + (5 if t in self._tags[i] else 0)
                    best = max(best, s + min(self._body[i].count(t), 3))
                score += best
            if score > 0:
                scored.append((page.key, float(score), page.path))
        scored.sort(key=lambda x: (-x[1], x[2]))
        return [(key, score) for key, score, _ in scored[:k]]
