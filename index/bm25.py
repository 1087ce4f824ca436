"""The tantivy BM25 index over chunks.

Fields: ``title`` (page title and aliases, boosted), ``headings``, ``body`` (stemmed prose),
``facets`` (tags, symptoms, techniques, ...), ``questions`` (the page's ``questions:``, on each of its chunks),
``idents`` (identifiers kept whole) and ``filters``
(raw ``type:pattern``, ``corpus:kwiki``, ``arch:sm100`` ... terms for exact filtering).
User text never reaches tantivy's query parser: :func:`build_query` assembles term queries
from the analyzers' tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import tantivy
from rapidfuzz.distance import OSA

from kwiki.ingest.models import Chunk, Page

from .analysis import IDENT, PROSE, ident_tokens, prose_tokens, register
from .params import RankingParams

#: The prose fields of a chunk document (their query-time weights are ``RankingParams.field_boosts``).
FIELDS = ("title", "headings", "body", "facets", "questions")


#: Bump when what a field holds changes (``_document``, ``filter_terms``, ``facet_text``): it is part of the
#: build fingerprint, so the next ``kwiki ingest`` rebuilds.
LAYOUT_VERSION = 1


def text_fields() -> list[tuple[str, str]]:
    """(field, tokenizer) of every text field, in schema order."""
    return [*((name, PROSE) for name in FIELDS), ("idents", IDENT), ("filters", "raw")]


def layout() -> str:
    """The fields a build writes with their tokenizers and the layout version (the fingerprint's ``bm25_layout``).

    >>> layout().split(" ")[0]
    'v1:'
    """
    return f"v{LAYOUT_VERSION}: " + ", ".join(f"{name}/{tok}" for name, tok in text_fields())


def schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("row", stored=True, indexed=False, fast=False)
    for name, tokenizer in text_fields():
        sb.add_text_field(name, stored=False, tokenizer_name=tokenizer)
    return sb.build()


def filter_terms(page: Page) -> list[str]:
    """The exact-match terms a page can be filtered by."""
    terms = [f"type:{page.type}", f"corpus:{page.corpus}"]
    if page.confidence:
        terms.append(f"confidence:{page.confidence}")
    terms += [f"arch:{a.lower().replace('_', '')}" for a in page.facet("architectures")]
    terms += [f"tag:{t.lower()}" for f in ("tags", "techniques", "hardware_features", "kernel_types", "symptoms") for t in page.facet(f)]
    terms += [f"lang:{x.lower()}" for x in page.facet("languages")]
    return terms


def facet_text(page: Page) -> str:
    values = [v for f in ("tags", "techniques", "hardware_features", "kernel_types", "languages", "symptoms") for v in page.facet(f)]
    return " ".join(v.replace("-", " ") for v in values)


def _document(page: Page, row: int, headings: str, body: str) -> tantivy.Document:
    signal_words = " ".join(str(s.get("signal", "")) for s in page.ncu_signals)
    metric_names = " ".join(
        str(m) for s in page.ncu_signals if isinstance(s.get("metrics"), dict) for m in s["metrics"].values()
    )
    idents = " ".join(ident_tokens(" ".join((page.title, headings, body, metric_names, " ".join(page.aliases)))))
    return tantivy.Document(
        row=row,
        title=f"{page.title} {' '.join(page.aliases)}",
        headings=headings,
        body=body,
        facets=f"{facet_text(page)} {signal_words.replace('-', ' ')}",
        questions=" ".join(page.questions),
        idents=idents,
        filters=filter_terms(page),
    )


class DocWriter:
    """A tantivy index written document by document (its writer flushes segments within a fixed heap)."""

    def __init__(self, path: Path, index_schema: tantivy.Schema | None = None) -> None:
        path.mkdir(parents=True)
        self.index = tantivy.Index(index_schema or schema(), path=str(path))
        register(self.index)
        self.writer = self.index.writer(heap_size=128_000_000, num_threads=1)

    def add(self, doc: tantivy.Document) -> None:
        self.writer.add_document(doc)

    def close(self) -> None:
        self.writer.commit()
        self.writer.wait_merging_threads()


def _write(path: Path, docs: Iterable[tantivy.Document], index_schema: tantivy.Schema | None = None) -> None:
    writer = DocWriter(path, index_schema)
    for doc in docs:
        writer.add(doc)
    writer.close()


#: Fields of the page-level index: what every KernelWiki-format page has, searched without boosts.
PAGE_FIELDS = ("title", "tags", "body")


def page_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("row", stored=True, indexed=False, fast=False)
    for name in PAGE_FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name=PROSE)
    sb.add_text_field("filters", stored=False, tokenizer_name="raw")
    return sb.build()


def write_pages(path: Path, pages: dict[str, Page]) -> None:
    """The page index: one document per page (``row`` = position in ``pages``), its title, tag fields and whole
    body, so a short page and a long one compete as pages, not as chunks."""
    _write(path, (page_document(page, row) for row, page in enumerate(pages.values())), page_schema())


def page_document(page: Page, row: int) -> tantivy.Document:
    """The page index's document of ``page``, the ``row``-th page of the build."""
    return tantivy.Document(row=row, title=f"{page.title} {' '.join(page.aliases)}", tags=facet_text(page),
                            body=page.body, filters=filter_terms(page))


def _filtered(schema: tantivy.Schema, should: list, must_filters: list[list[str]]) -> tantivy.Query:
    """``should`` (any of the terms) AND, for each group of ``must_filters``, one of its filter terms."""
    clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(should))]
    for alternatives in must_filters:
        ors = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "filters", t)) for t in alternatives]
        clauses.append((tantivy.Occur.Must, tantivy.Query.boolean_query(ors)))
    return tantivy.Query.boolean_query(clauses)


class PageIndex:
    """Plain BM25 over whole pages (``write_pages``): every query word once, in any of the fields."""

    def __init__(self, path: Path) -> None:
        self.index = tantivy.Index.open(str(path))
        register(self.index)
        self.schema = self.index.schema
        self.searcher = self.index.searcher()

    def known_share(self, terms: list[str]) -> float:
        """The share of the terms' idf mass carried by terms some page contains (1.0 for no terms).

        A word no page has seen weighs what BM25 would give a word of one page in a million: it is the strongest
        sign that the query is about something else. The idf is BM25's, ``ln(1 + (N - df + 0.5) / (df + 0.5))``
        over the page bodies."""
        terms = list(dict.fromkeys(terms))
        if not terms:
            return 1.0
        n = self.searcher.num_docs
        total = known = 0.0
        for term in terms:
            df = max(self.searcher.doc_freq(name, term) for name in PAGE_FIELDS)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += idf
            known += idf if df else 0.0
        return known / total

    def search(self, terms: list[str], must_filters: list[list[str]], limit: int) -> list[tuple[int, float]]:
        """(page row, score) best first."""
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, name, term))
                  for term in dict.fromkeys(terms) for name in PAGE_FIELDS]
        if not should:
            return []
        hits = self.searcher.search(_filtered(self.schema, should, must_filters), limit).hits
        return [(self.searcher.doc(addr)["row"][0], score) for score, addr in hits]


def write(path: Path, pages: dict[str, Page], chunks: list[Chunk]) -> None:
    """The chunk index: one document per chunk, ``row`` = position in the chunk list."""
    _write(path, (chunk_document(pages[c.page_key], c, row) for row, c in enumerate(chunks)))


def chunk_document(page: Page, chunk: Chunk, row: int) -> tantivy.Document:
    """The chunk index's document of ``chunk`` (of ``page``), the ``row``-th chunk of the build."""
    return _document(page, row, " ".join(chunk.heading_path), chunk.text)


@dataclass
class BM25Query:
    """Tokens of a query, each list weighted separately (expansions count less)."""

    terms: list[tuple[str, float]] = field(default_factory=list)  # prose tokens with weight
    idents: list[tuple[str, float]] = field(default_factory=list)
    must_filters: list[list[str]] = field(default_factory=list)  # AND of ORs of filter terms
    questions: bool = True  # match the pages' questions too (off: plain BM25 over what the pages say)


class BM25Index:
    def __init__(self, path: Path) -> None:
        self.index = tantivy.Index.open(str(path))
        register(self.index)
        self.schema = self.index.schema
        self.searcher = self.index.searcher()
        self.correct = lru_cache(maxsize=10_000)(self._correct)  # per index: its vocabulary decides

    def _correct(self, term: str) -> str | None:
        """The indexed word that a misspelt query word most likely meant, or None.

        Only a word of 5+ letters that no field has ever seen is corrected: to the most frequent indexed word
        within one edit (two from 8 letters on; a swap of neighbours is one edit) that starts with the same two
        letters. Words are compared as the analyzer stems them::

            >>> index.correct("schedulr"), index.correct("histogarm"), index.correct("schedul")   # doctest: +SKIP
            ('schedul', 'histogram', None)
        """
        if len(term) < 5 or not term.isalpha() or any(self.searcher.doc_freq(f, term) for f in FIELDS):
            return None
        limit = 1 if len(term) < 8 else 2
        best = min(((OSA.distance(term, t), -n, t) for t, n in self.searcher.terms_with_prefix("body", term[:2])
                    if abs(len(t) - len(term)) <= limit), default=None)
        return best[2] if best and best[0] <= limit else None

    def build_query(self, q: BM25Query, params: RankingParams) -> tantivy.Query | None:
        should: list[tuple[tantivy.Occur, tantivy.Query]] = []
        fields = {n: b for n, b in params.field_boosts.items() if n in FIELDS and (q.questions or n != "questions")}
        for term, weight in q.terms:
            for name, boost in fields.items():
                tq = tantivy.Query.term_query(self.schema, name, term)
                should.append((tantivy.Occur.Should, tantivy.Query.boost_query(tq, boost * weight)))
        for term, weight in q.idents:
            tq = tantivy.Query.term_query(self.schema, "idents", term)
            should.append((tantivy.Occur.Should, tantivy.Query.boost_query(tq, params.ident_boost * weight)))
        if not should:
            return None
        return _filtered(self.schema, should, q.must_filters)

    def search(self, q: BM25Query, limit: int, params: RankingParams) -> list[tuple[int, float]]:
        """(chunk row, score) best first."""
        query = self.build_query(q, params)
        if query is None:
            return []
        hits = self.searcher.search(query, limit).hits
        return [(self.searcher.doc(addr)["row"][0], score) for score, addr in hits]


def query_tokens(text: str) -> tuple[list[str], list[str]]:
    """(prose tokens without stopwords, identifier tokens) of user text, deduplicated in order."""
    prose = list(dict.fromkeys(prose_tokens(text, drop_stopwords=True)))
    idents = list(dict.fromkeys(ident_tokens(text)))
    return prose[:64], idents[:32]
