"""KernelWiki's own keyword scoring, re-implemented from its ``scripts/query.py``.

Per whitespace token, case-insensitive substring matching: +10 when the token is in the frontmatter
title, +5 when it is in a tag field (``tags``, ``techniques``, ``hardware_features``, ``kernel_types``,
``languages``, ``aliases``, ``symptoms``), + min(occurrences in the body, 3). A token that is a variant
in the corpus' ``data/aliases.yaml`` is also tried as its canonical term, and the better of the two
scores counts. Ties are broken by path. Page-level aliases are not expansions there, only tag text.

    >>> KeywordBaseline(pages, {"tcgen05": ["UMMA"]}).search("UMMA tile", k=10)   # doctest: +SKIP
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from kwiki.index.fusion import RRF_K, rrf
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


class NaiveFusion:
    """The naive hybrid every report shows beside kwiki's ranking: tantivy BM25 over whole pages (title, the tag
    fields, body; English stemming; no boosts) and MiniLM max-chunk cosine over the index's heading chunks, fused
    by reciprocal rank fusion with k = 60. Nothing of it is tuned: it is what two lines of a search library give.

    ``chunk_matrix`` holds the index's normalized chunk vectors, ``chunk_page`` each row's page key, ``encode``
    embeds a list of queries.
    """

    DEPTH = 100  # pages each list contributes to the fusion

    def __init__(self, pages: dict[str, Page], chunk_matrix: np.ndarray, chunk_page: list[str],
                 encode: Callable[[list[str]], np.ndarray]) -> None:
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_unsigned_field("pos", stored=True)
        for name in ("title", "tags", "body"):
            sb.add_text_field(name, stored=False, tokenizer_name="en_stem")
        self.index = tantivy.Index(sb.build())  # in memory
        writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        self.keys = list(pages)
        for pos, key in enumerate(self.keys):
            p = pages[key]
            writer.add_document(tantivy.Document(pos=pos, title=str(p.meta.get("title", p.title)), tags=_tag_text(p.meta),
                                                 body=p.body))
        writer.commit()
        self.index.reload()
        self.matrix = chunk_matrix
        self.page_of_row = self._rows(chunk_page)
        self.encode = encode

    def _rows(self, chunk_page: list[str]) -> np.ndarray:
        pos = {k: i for i, k in enumerate(self.keys)}
        return np.array([pos.get(k, -1) for k in chunk_page], dtype=np.int64)

    def bm25(self, query: str) -> list[str]:
        words = re.findall(r"[A-Za-z0-9]+", query)
        if not words:
            return []
        parsed = self.index.parse_query(" ".join(words), ["title", "tags", "body"])
        found = self.index.searcher().search(parsed, self.DEPTH).hits
        searcher = self.index.searcher()
        return [self.keys[searcher.doc(addr)["pos"][0]] for _, addr in found]

    def vector(self, query: str) -> list[str]:
        if self.matrix.shape[0] == 0:
            return []
        cos = self.matrix @ self.encode([query])[0]
        best = np.full(len(self.keys), -np.inf, dtype=np.float32)
        ok = self.page_of_row >= 0
        np.maximum.at(best, self.page_of_row[ok], cos[ok])
        order = np.argsort(-best, kind="stable")[: self.DEPTH]
        return [self.keys[i] for i in order if np.isfinite(best[i])]

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        fused = rrf([self.bm25(query), self.vector(query)], k=RRF_K)
        return sorted(fused.items(), key=lambda x: (-x[1], x[0]))[:k]
