"""A build's files written batch by batch: pages in, BM25 documents, vectors and records out.

``build.build_index`` hands a :class:`BuildWriter` the pages a :class:`~kwiki.ingest.corpus.CorpusReader` reads, a
batch of :data:`BATCH_PAGES` at a time: each batch's chunks and sentences are embedded (or taken from the cache),
appended to the lancedb tables and the two tantivy indexes, and its pages and chunks written to ``pages.jsonl`` and
``chunks.jsonl``. Memory holds one batch, whatever the corpus' size; what grows with the corpus is a few strings a
page (keys, the corpus hash's entries).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import IO, Callable

import numpy as np

from kwiki.ingest import chunking
from kwiki.ingest.corpus import Vocabulary
from kwiki.ingest.models import Artifact, Chunk, IngestReport, Page, Problem

from . import bm25, vectors

#: Pages per batch: a few thousand chunks and sentences, a few MiB of vectors. Peak memory follows this, not the corpus.
BATCH_PAGES = 1000

#: Progress callback: (stage, done, total).
Progress = Callable[[str, int, int], None]


#: Lines the model gains nothing from: a bare file path (KernelWiki PR pages list every changed file, a third of
#: their word pieces) and checklist boxes of PR templates. BM25's identifier field still matches the paths.
_NOT_FOR_MODEL = re.compile(
    r"^\s*(?:[-*+]\s*)?(?:`?[\w.@+-]*(?:/[\w.@+-]+)+\.\w{1,6}`?[\s,;:]*(?:\([^)]*\))?|\[[ xX]\].*)\s*$"
)


def embed_text(title: str, heading_path: list[str], text: str) -> str:
    r"""What the model sees for a chunk: the page title and heading path give it context.

    >>> embed_text("Fix", ["Changed Files"], "Speeds up decode.\n- `csrc/attn/decode.cu`\n- [x] tests pass")
    'Fix. Changed Files\nSpeeds up decode.'
    """
    head = " > ".join(heading_path)
    body = "\n".join(line for line in text.splitlines() if not _NOT_FOR_MODEL.match(line))
    return f"{title}. {head}\n{body}" if head else f"{title}\n{body}"


def sentence_key(text: str) -> str:
    """Cache key of a sentence vector (chunks use their content hash)."""
    return hashlib.sha256(f"sentence\0{text}".encode()).hexdigest()


#: Sentence vectors per page (a long curated page has a few hundred); a page with more is reported, the rest left out.
MAX_SENTENCES_PER_PAGE = 2000


def curated_sentences(pages: dict[str, Page], chunks: list[Chunk],
                      report: IngestReport | None = None) -> tuple[list[int], list[str]]:
    """(chunk row, sentence) of every sentence of the curated pages, as two lists (``vectors.write_sentences``);
    at most :data:`MAX_SENTENCES_PER_PAGE` per page, a page over it reported in ``report``."""
    pairs: list[tuple[int, str]] = []
    per_page: dict[str, int] = {}
    for row, c in enumerate(chunks):
        if pages[c.page_key].type not in chunking.SENTENCE_TYPES:
            continue
        for text in chunking.sentences(c.text, chunking.SENTENCE_MIN_WORDS):
            n = per_page[c.page_key] = per_page.get(c.page_key, 0) + 1
            if n <= MAX_SENTENCES_PER_PAGE:
                pairs.append((row, text))
    for key, n in per_page.items():
        if n > MAX_SENTENCES_PER_PAGE and report is not None:
            page = pages[key]
            report.warnings.append(Problem(corpus=page.corpus, path=page.path, reason=(
                f"page has {n} sentences, over the {MAX_SENTENCES_PER_PAGE}-sentence page limit; "
                f"the first {MAX_SENTENCES_PER_PAGE} get vectors")))
    return [r for r, _ in pairs], [t for _, t in pairs]


def page_questions(pages: dict[str, Page], chunks: list[Chunk]) -> tuple[list[str], list[str]]:
    """(page key, question) of every question a page lists that has a chunk in the index, as two lists."""
    chunked = {c.page_key for c in chunks}
    pairs = [(key, q) for key, p in pages.items() if key in chunked for q in p.questions]
    return [k for k, _ in pairs], [q for _, q in pairs]


def nearest_chunks(page_keys: list[str], question_vectors: np.ndarray, chunks: list[Chunk],
                   chunk_matrix: np.ndarray) -> list[int]:
    """For each question, the row of its page's chunk closest to it: the section that answers it, which the
    question's vector then stands for (as a sentence stands for its chunk)."""
    rows_of: dict[str, list[int]] = {}
    for row, c in enumerate(chunks):
        rows_of.setdefault(c.page_key, []).append(row)
    out = []
    for key, vec in zip(page_keys, question_vectors):
        rows = rows_of[key]
        out.append(rows[int(np.argmax(chunk_matrix[rows] @ vec))])
    return out


def _vector_row(c: Chunk) -> dict[str, object]:
    """The columns stored beside a chunk's vector in lancedb."""
    return {"chunk_id": c.id, "page_key": c.page_key, "corpus": c.corpus, "path": c.provenance.path,
            "heading": " > ".join(c.heading_path), "line_start": c.line_start, "line_end": c.line_end,
            "content_hash": c.content_hash}


class BuildWriter:
    """Writes one build folder from batches of pages (:meth:`add`), then its records (:meth:`close`)."""

    def __init__(self, folder: Path, cache: vectors.EmbeddingCache, embedder: vectors.Embedder | None, threads: int,
                 adapter: str | None, progress: Progress | None = None) -> None:
        self.folder = folder
        self.cache = cache
        self.embedder = embedder
        self.threads = threads
        self.adapter = adapter
        self.progress = progress
        self.chunk_docs = bm25.DocWriter(folder / "bm25")
        self.page_docs = bm25.DocWriter(folder / "bm25-pages", bm25.page_schema())
        (folder / "vectors").mkdir()
        self.chunk_table = vectors.TableWriter(folder / "vectors", vectors.TABLE)
        self.sentence_table = vectors.TableWriter(folder / "vectors", vectors.SENTENCES)
        self.pages_out: IO[str] = open(folder / "pages.jsonl", "w", encoding="utf-8")
        self.chunks_out: IO[str] = open(folder / "chunks.jsonl", "w", encoding="utf-8")
        self.pages = 0
        self.chunks = 0
        self.sentences = 0
        self.questions = 0
        self.embedded = 0
        self.hashed: list[tuple[str, str, str]] = []  # (corpus, path, sha256) of every page, for the corpus hash

    def add(self, batch: list[tuple[Page, list[Chunk]]], report: IngestReport) -> None:
        """Index a batch of pages with their chunks; chunk rows and page rows continue the previous batches'."""
        pages = {p.key: p for p, _ in batch}
        chunks = [c for _, cs in batch for c in cs]
        row0 = self.chunks
        for page, page_chunks in batch:
            self.page_docs.add(bm25.page_document(page, self.pages))
            self.pages += 1
            for c in page_chunks:
                self.chunk_docs.add(bm25.chunk_document(page, c, self.chunks))
                self.chunks += 1
            self.pages_out.write(page.model_dump_json() + "\n")
            self.hashed.append((page.corpus, page.path, page.provenance.sha256))
        for c in chunks:
            self.chunks_out.write(c.model_dump_json(exclude={"provenance"}) + "\n")
        sentence_rows, sentence_texts = curated_sentences(pages, chunks, report)
        question_pages, question_texts = page_questions(pages, chunks)
        sentence_keys = [sentence_key(t) for t in sentence_texts + question_texts]
        todo = {c.content_hash: embed_text(pages[c.page_key].title, c.heading_path, c.text) for c in chunks}
        todo.update(zip(sentence_keys, sentence_texts + question_texts))
        self._embed_missing(todo)
        chunk_matrix = self.cache.get([c.content_hash for c in chunks])
        if chunks:
            columns = [_vector_row(c) for c in chunks]
            self.chunk_table.add({key: [r[key] for r in columns] for key in columns[0]}, chunk_matrix)
        sentence_matrix = self.cache.get(sentence_keys)
        question_rows = nearest_chunks(question_pages, sentence_matrix[len(sentence_texts):], chunks, chunk_matrix)
        self.sentence_table.add(vectors.sentence_batch(
            [row0 + r for r in sentence_rows + question_rows], sentence_texts + question_texts,
            [False] * len(sentence_texts) + [True] * len(question_texts)), sentence_matrix)
        self.sentences += len(sentence_texts)
        self.questions += len(question_texts)

    def _embed_missing(self, todo: dict[str, str]) -> None:
        """Embed the texts (content key -> text) the cache lacks, chunks and sentences in one length-sorted queue."""
        lacking = set(self.cache.missing(list(todo)))
        missing = [(h, text) for h, text in todo.items() if h in lacking]
        if not missing:
            return
        if self.embedder is None:
            self.embedder = vectors.Embedder(threads=self.threads, adapter=self.adapter)
        before = self.embedded

        def tick(n: int) -> None:
            self.embedded += n
            if self.progress:
                # the total is not known before the corpus is read: what this batch adds to what was done
                self.progress("embed", self.embedded, before + len(missing))

        self.cache.add([h for h, _ in missing], self.embedder.encode([text for _, text in missing], progress=tick))

    def close(self, artifacts: list[Artifact], vocab: dict[str, Vocabulary], report: IngestReport) -> None:
        """Finish the indexes and tables, and write the records only known at the end."""
        self.chunk_docs.close()
        self.page_docs.close()
        self.chunk_table.close()
        self.sentence_table.close(vectors.sentence_columns())
        self.pages_out.close()
        self.chunks_out.close()
        self.cache.save()
        (self.folder / "artifacts.json").write_text(json.dumps([a.model_dump() for a in artifacts], default=str))
        (self.folder / "vocab.json").write_text(json.dumps(
            {n: {"aliases": v.aliases, "tags": {k: sorted(s) for k, s in v.tags.items()}} for n, v in vocab.items()}))
        (self.folder / "report.json").write_text(report.model_dump_json(indent=2))

    def corpus_hash(self, artifacts: list[Artifact], vocab: dict[str, Vocabulary]) -> str:
        """One hash of every page file read (corpus, path, content), the artifacts' metadata and the aliases."""
        h = hashlib.sha256()
        for corpus, path, sha in sorted(self.hashed):
            h.update(f"{corpus}\0{path}\0{sha}\n".encode())
        for a in sorted(artifacts, key=lambda a: a.id):
            h.update(f"{a.id}\0{json.dumps(a.meta, sort_keys=True, default=str)}\n".encode())
        for name, voc in sorted(vocab.items()):
            h.update(json.dumps([name, sorted(voc.aliases.items())], default=str).encode())
        return h.hexdigest()
