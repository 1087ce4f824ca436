"""KernelWiki's own keyword scoring, re-implemented from the description of its ``query.py``.

Per whitespace token, case-insensitive substring matching: +10 when the token is in the title,
+5 when it is in a tag field, + min(occurrences in the body, 3). Query tokens that are aliases
are expanded one way, to their canonical term. Ties are broken by path.
"""

from __future__ import annotations

from kwiki.ingest.models import Page

TAG_FIELDS = ("tags", "techniques", "hardware_features", "kernel_types", "languages", "architectures", "symptoms")


class KeywordBaseline:
    def __init__(self, pages: dict[str, Page], aliases: dict[str, list[str]]) -> None:
        self.pages = list(pages.values())
        self.alias_to_canonical = {str(v).lower(): str(k).lower() for k, vs in aliases.items() for v in vs}
        self._title = [p.title.lower() for p in self.pages]
        self._tags = [" ".join(t.lower() for f in TAG_FIELDS for t in p.facet(f)) for p in self.pages]
        self._body = [p.body.lower() for p in self.pages]

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        tokens = [t.lower() for t in query.split() if t.strip()]
        expanded = list(tokens)
        for t in tokens:
            canon = self.alias_to_canonical.get(t)
            if canon and canon not in expanded:
                expanded.append(canon)
        scored = []
        for i, page in enumerate(self.pages):
            score = 0
            for t in expanded:
                if t in self._title[i]:
                    score += 10
                if t in self._tags[i]:
                    score += 5
                score += min(self._body[i].count(t), 3)
            if score > 0:
                scored.append((page.key, float(score), page.path))
        scored.sort(key=lambda x: (-x[1], x[2]))
        return [(key, score) for key, score, _ in scored[:k]]
