"""Hybrid search over a built index: BM25 + vectors, fused, rolled up to pages.

    >>> s = Searcher.open(Path(".kwiki/index"))                       # doctest: +SKIP
    >>> s.search("only 8 of my 132 SMs are busy at the end").hits[0].page_id   # doctest: +SKIP
    'pattern-tail-effect'
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kwiki.errors import BadRequest, IndexIncompatible, IndexMissing
from kwiki.ingest.models import Page
from kwiki.settings import DEFAULT_K, MAX_K, MAX_QUERY_CHARS

from . import pages as pages_mod
from . import vectors
from .bm25 import BM25Index, PageIndex
from .manifest import Manifest
from .pages import PageStore
from .params import RankingParams
from .pipeline import STAGES, Candidates, Plan, SearchOptions, model_text
from .query import AliasTable, Filters, clauses, clean_query, norm_phrase, plan_query
from .results import Correction, Hit, Interpreted, PageResponse, SearchResponse, SourceRef, Why
from .snippets import make_snippet, matched_terms


@dataclass
class Searcher:
    path: Path
    manifest: Manifest
    pages: dict[str, Page]
    chunk_ids: list[str]
    chunk_page: list[str]
    chunk_rows: list[dict[str, Any]]
    bm25: BM25Index
    page_bm25: PageIndex  # whole pages, one document each (rows in ``pages`` order)
    vindex: vectors.VectorIndex
    aliases: AliasTable
    artifacts: dict[str, dict[str, Any]]
    arch_vocab: set[str]
    embedder: vectors.Embedder | None = None
    threads: int = 2
    corpus_aliases: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # corpus -> its data/aliases.yaml
    params: RankingParams = field(default_factory=lambda: RankingParams())  # the ranking's numbers (``kwiki eval --set``)
    # Derived once in __post_init__, never per query.
    page_keys: list[str] = field(init=False)
    page_pos: dict[str, int] = field(init=False)  # page key -> position in page_keys
    page_index: np.ndarray = field(init=False)  # chunk row -> position in page_keys
    routable: list[tuple[str, Page]] = field(init=False)  # pages an NCU signal can point to
    page_rows: dict[str, list[int]] = field(init=False)  # page key -> its chunk rows, in order
    known_types: set[str] = field(init=False)
    known_corpora: set[str] = field(init=False)
    page_repo: dict[str, str] = field(init=False)  # PR page key -> its project's name, lower case, no separators
    repo_names: set[str] = field(init=False)  # the values of page_repo
    _mask_cache: OrderedDict = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self.page_keys = list(self.pages)
        self.page_pos = {k: i for i, k in enumerate(self.page_keys)}
        self.page_index = np.array([self.page_pos[k] for k in self.chunk_page], dtype=np.int64)
        self.routable = [(k, p) for k, p in self.pages.items() if p.type in ("pattern", "ncu")]
        self.page_rows = {}
        for row, key in enumerate(self.chunk_page):
            self.page_rows.setdefault(key, []).append(row)
        self.known_types = {p.type for p in self.pages.values()}
        self.known_corpora = {p.corpus for p in self.pages.values()}
        self.page_repo = {}
        for key, p in self.pages.items():
            repo = str(p.meta.get("repo") or "") if p.type == "source-pr" else ""
            name = norm_phrase(repo.rsplit("/", 1)[-1]).replace(" ", "")  # "NVIDIA/TensorRT-LLM" -> "tensorrtllm"
            if len(name) >= 4:  # "tvm"-like short names would match too much prose
                self.page_repo[key] = name
        self.repo_names = set(self.page_repo.values())

    # ---------------------------------------------------------------- loading
    @classmethod
    def open(cls, index_dir: Path, embedder: vectors.Embedder | None = None, threads: int = 2) -> "Searcher":
        """Open ``<index_dir>/current`` (or ``index_dir`` itself when it is a build folder)."""
        store = PageStore.open(index_dir)
        build, manifest, pages, artifacts = store.path, store.manifest, store.pages, store.artifacts
        rows = []
        with open(build / "chunks.jsonl", encoding="utf-8") as fh:
            for line in fh:
                rows.append(json.loads(line))
        ids, matrix = vectors.load_matrix(build / "vectors")
        sentence_rows, sentence_texts, sentence_matrix, is_question = vectors.load_sentences(build / "vectors")
        if ids != [r["id"] for r in rows]:
            raise IndexMissing(f"index at {build} is inconsistent (vectors vs chunks)", hint="rebuild with `kwiki ingest`")
        vocab = json.loads((build / "vocab.json").read_text())
        aliases = AliasTable()
        arch_vocab: set[str] = set()
        for corpus_vocab in vocab.values():
            for canonical, variants in corpus_vocab.get("aliases", {}).items():
                aliases.add(canonical, variants)
            arch_vocab |= set(corpus_vocab.get("tags", {}).get("architectures", []))
        for p in pages.values():
            if p.aliases:
                slug = p.id.split("-", 1)[-1].replace("-", " ")
                aliases.add(slug, p.aliases)
            arch_vocab |= {a.lower().replace("_", "") for a in p.facet("architectures")}
        if embedder is not None and embedder.model_id != manifest.model:
            raise IndexIncompatible(f"index at {build} was embedded with {manifest.model}, not {embedder.model_id}",
                                    hint="rebuild with `kwiki ingest`, or set KWIKI_EMBED_ADAPTER to the build's adapter")
        ann = {name: vectors.AnnTable(build / "vectors", name) for name in manifest.ann}
        return cls(
            path=build, manifest=manifest, pages=pages, chunk_ids=ids, chunk_page=[r["page_key"] for r in rows],
            chunk_rows=rows, bm25=BM25Index(build / "bm25"), page_bm25=PageIndex(build / "bm25-pages"),
            vindex=vectors.VectorIndex(matrix, sentence_matrix, sentence_rows, sentence_texts, is_question,
                                       ann_chunks=ann.get(vectors.TABLE), ann_sentences=ann.get(vectors.SENTENCES)),
            aliases=aliases,
            artifacts=artifacts, arch_vocab=arch_vocab, embedder=embedder, threads=threads,
            corpus_aliases={name: v.get("aliases", {}) for name, v in vocab.items()},
        )

    def _embedder(self) -> vectors.Embedder:
        if self.embedder is None:
            # queries are embedded by the model the build embedded the pages with (its adapter, if any)
            self.embedder = vectors.Embedder(threads=self.threads, adapter=vectors.adapter_of(self.manifest.model))
        return self.embedder

    # ---------------------------------------------------------------- filters
    def normalize_filters(self, raw: dict[str, list[str] | str | None]) -> Filters:
        f = Filters()
        for name in ("type", "tag", "architecture", "language", "confidence", "corpus"):
            value = raw.get(name)
            values = [value] if isinstance(value, str) else list(value or [])
            values = [str(v).strip() for v in values if str(v).strip()]
            if len(values) > 20 or any(len(v) > 100 for v in values):
                raise BadRequest(f"too many or too long values for filter '{name}'", hint="at most 20 values of 100 characters")
            setattr(f, name, values)
        for name, known in (("type", self.known_types), ("corpus", self.known_corpora)):
            bad = [v for v in getattr(f, name) if v not in known]
            if bad:
                raise BadRequest(f"unknown {name} {bad}", hint=f"one of: {', '.join(sorted(known))}")
        allowed_conf = {"verified", "source-reported", "inferred", "experimental"}
        if any(v not in allowed_conf for v in f.confidence):
            raise BadRequest(f"unknown confidence {f.confidence}", hint=f"one of: {', '.join(sorted(allowed_conf))}")
        arch: list[str] = []
        for v in f.architecture:
            canon = self.aliases.canonical_of(v, self.arch_vocab) or v.lower().replace("_", "").replace(" ", "")
            variants = sorted(a for a in self.arch_vocab if a == canon or (a.startswith(canon) and a[len(canon):] in ("a", "f")))
            if not variants:
                raise BadRequest(f"unknown architecture '{v}'", hint=f"one of: {', '.join(sorted(self.arch_vocab))} or a GPU name such as B200")
            arch += variants
        f.architecture = arch
        f.tag = [t.lower() for t in f.tag]
        f.language = [t.lower() for t in f.language]
        return f

    def _mask(self, f: Filters) -> tuple[np.ndarray, np.ndarray] | None:
        """(page mask, chunk mask) for the filters, cached."""
        if f.empty():
            return None
        key = f.key()
        if key in self._mask_cache:
            self._mask_cache.move_to_end(key)
            return self._mask_cache[key]
        ok = np.array([self._page_matches(self.pages[k], f) for k in self.page_keys], dtype=bool)
        mask = (ok, ok[self.page_index])
        self._mask_cache[key] = mask
        if len(self._mask_cache) > 64:
            self._mask_cache.popitem(last=False)
        return mask

    @staticmethod
    def _page_matches(p: Page, f: Filters) -> bool:
        if f.type and p.type not in f.type:
            return False
        if f.corpus and p.corpus not in f.corpus:
            return False
        if f.confidence and p.confidence not in f.confidence:
            return False
        if f.architecture and not {a.lower().replace("_", "") for a in p.facet("architectures")} & set(f.architecture):
            return False
        if f.language and not {x.lower() for x in p.facet("languages")} & set(f.language):
            return False
        if f.tag:
            tags = {t.lower() for n in ("tags", "techniques", "hardware_features", "kernel_types", "symptoms") for t in p.facet(n)}
            if not tags & set(f.tag):
                return False
        return True

    # ---------------------------------------------------------------- search
    def search(self, q: str | None, k: int = DEFAULT_K, filters: dict | None = None, options: SearchOptions | None = None,
               max_chars: int = MAX_QUERY_CHARS, max_k: int = MAX_K, params: RankingParams | None = None) -> SearchResponse:
        """The pipeline of ``pipeline.STAGES`` over a plan of the query, then the top ``k`` pages as hits."""
        started = time.perf_counter()
        params = params or self.params
        plan = self.plan(q, k, filters, options or SearchOptions(), max_chars, max_k, params)
        cands = Candidates()
        timings = {"plan": (time.perf_counter() - started) * 1000}
        for stage in STAGES:
            t = time.perf_counter()
            stage(plan, cands, params, self)
            timings[stage.__name__] = (time.perf_counter() - t) * 1000
        ranked = sorted(cands.pages.items(), key=self.rank_order)[: int(k) if cands.no_match is None else min(int(k), params.floor_nearest)]
        t = time.perf_counter()
        response = self.present(plan, cands, ranked, params, started)
        timings["present"] = (time.perf_counter() - t) * 1000
        response.stages_ms = {name: round(ms, 3) for name, ms in timings.items()}
        return response

    def plan(self, q: str | None, k: int, filters: dict | None, options: SearchOptions, max_chars: int, max_k: int,
             params: RankingParams) -> Plan:
        """Check the request and work out the query: tokens, aliases, typos, NCU signals, clauses, vectors, filters."""
        text = clean_query(q, max_chars)
        if not 1 <= int(k) <= max_k:
            raise BadRequest(f"k={k} is out of range", hint=f"1 <= k <= {max_k}")
        f = self.normalize_filters(filters or {})
        query = plan_query(text, self.aliases, f, params, use_aliases=options.aliases,
                           correct=self.bm25.correct if options.typos and options.bm25 else None)
        signals = self._route(text) if options.ncu_routing else []
        if signals:
            for term in signals[0].get("expand", []):
                query.bm25.terms.append((term, params.signal_expand_weight))
        query.bm25.questions = options.questions
        plan = Plan(text=text, k=int(k), query=query, options=options, signals=signals, mask=self._mask(f))
        if options.vector:
            plan.clauses = clauses(text, params) if options.clauses else []
            plan.vectors = self._embedder().encode(plan.clauses or [model_text(text, query, params)])
        return plan

    def present(self, plan: Plan, cands: Candidates, ranked: list[tuple[str, float]], params: RankingParams,
                started: float) -> SearchResponse:
        """Hits with their snippets and the per-hit ``why``."""
        qvec = plan.vector
        hits = []
        for key, score in ranked:
            page = self.pages[key]
            row = cands.best_chunk.get(key)
            if row is None:  # reached only through an NCU signal: show its first section
                row = self.page_rows.get(key, [None])[0]
            routed = cands.routed.get(key)
            sentence = None
            if qvec is not None and row is not None and (plan.options.sentences or plan.options.questions):
                # which sentence or listed question, if any, carried the chunk
                sentence = self.vindex.best_sentence(row, qvec, params, plan.options.sentences, plan.options.questions)
            hits.append(self._hit(page, score, row, plan, cands, [routed[1]] if routed else [], sentence))
        if len(plan.clauses) > 1 and hits and plan.vectors is not None:
            self._mark_clauses(hits, plan.clauses, plan.vectors)
        f = plan.query.filters
        return SearchResponse(
            query=plan.text, k=plan.k,
            filters={n: getattr(f, n) for n in ("type", "tag", "architecture", "language", "confidence", "corpus") if getattr(f, n)},
            hits=hits, signals=[{k2: v for k2, v in s.items() if k2 != "expand"} for s in plan.signals],
            took_ms=round((time.perf_counter() - started) * 1000, 2),
            interpreted=Interpreted(aliases=plan.query.aliases, clauses=plan.clauses,
                                    corrections=[Correction(typed=a, searched=b) for a, b in plan.query.corrections]),
            index={"build_id": self.manifest.build_id, "corpus_hash": self.manifest.corpus_hash[:12],
                   "vector_search": self.vindex.describe(params)},
            no_match=cands.no_match is not None, note=cands.no_match,
        )

    def _mark_clauses(self, hits: list[Hit], parts: list[str], vecs: np.ndarray) -> None:
        """Set ``why.clause`` of each hit: the clause of a long query its page answers best *relative to the other
        hits* (a short clause like "DRAM 85% of peak" sits close to every memory page; what tells pages apart is
        which clue each covers better than the rest: a z-score per clause over the hits)."""
        scores = np.stack([self.vindex.clause_scores(np.array(self.page_rows.get(h.id, []), dtype=np.int64), vecs)
                           for h in hits])
        relative = (scores - scores.mean(axis=0)) / np.maximum(scores.std(axis=0), 1e-3)
        for hit, rel, own in zip(hits, relative, scores):
            hit.why.clause = parts[int(np.argmax(rel + 1e-3 * own))]

    def rank_order(self, item: tuple[str, float]) -> tuple[float, str]:
        """Sort key of (page key, score): best first, ties by path."""
        return -item[1], self.pages[item[0]].path

    def _route(self, text: str) -> list[dict[str, Any]]:
        """The NCU signals ``text`` names (profiling's tables), their ``expand`` words analyzed as BM25 terms."""
        from kwiki.profiling.routing import MAX_EXPAND, route

        from .analysis import prose_tokens

        signals = route(text)
        for sig in signals:
            terms = (t for word in sig.get("expand", []) for t in prose_tokens(word) if t)
            sig["expand"] = list(dict.fromkeys(terms))[:MAX_EXPAND]
        return signals

    def signal_pages(self, signals: list[dict[str, Any]], f: Filters, params: RankingParams) -> dict[str, tuple[float, str]]:
        """Pages an NCU signal points to: pattern ids (kwiki corpus) or matching symptoms (KernelWiki)."""
        out: dict[str, tuple[float, str]] = {}
        for rank, sig in enumerate(signals[: params.signals_routed]):
            weight = sig.get("confidence", 1.0) * (1.0 if rank == 0 else params.signal_next_weight)
            pattern_ids = set(sig.get("patterns", []))
            symptoms = sig.get("symptoms", [])
            for key, page in self.routable:
                if not self._page_matches(page, f):
                    continue
                page_signals = {str(s.get("signal")) for s in page.ncu_signals}
                if page.id in pattern_ids:
                    w = weight
                elif page_signals and sig["signal"] == next(iter(s.get("signal") for s in page.ncu_signals), None):
                    w = params.signal_main_share * weight
                elif not page_signals and page.type == "pattern" and set(symptoms) & set(page.facet("symptoms")):
                    # KernelWiki patterns carry symptoms but no metric names; the signal's own symptom counts most
                    first = min(i for i, sym in enumerate(symptoms) if sym in page.facet("symptoms"))
                    w = params.symptom_route * weight / (1 + first)
                else:
                    continue
                w *= 1.0 if page.type == "pattern" else params.signal_non_pattern
                if w > out.get(key, (0.0, ""))[0]:
                    out[key] = (w, sig["signal"])
        return out

    def _hit(self, page: Page, score: float, row: int | None, plan: Plan, cands: Candidates, signals: list[str],
             sentence: str | None) -> Hit:
        query = plan.query
        lifted = cands.lifted.get(page.key)
        crow: dict[str, Any] = (self.chunk_rows[row] if row is not None
                                else {"text": page.title, "heading_path": [], "line_start": 1, "line_end": 1})
        return Hit(
            id=page.key, page_id=page.id, title=page.title, type=page.type, corpus=page.corpus, path=page.path,
            score=round(float(score), 6), confidence=page.confidence, reproducibility=page.reproducibility,
            snippet=make_snippet(crow["text"], query.prose + query.idents),
            heading_path=crow.get("heading_path", []), lines=(crow["line_start"], crow["line_end"]),
            sources=self.resolve(page.sources, page.corpus),
            why=Why(bm25_rank=cands.rank(row, "bm25") if row is not None else None,
                    vector_rank=cands.rank(row, "vector") if row is not None else None, aliases=query.aliases,
                    signals=signals, type_prior=cands.priors.get(page.key, 1.0),
                    matched_terms=matched_terms(crow["text"], query.prose),
                    sentence=sentence, fix_of=lifted[1] if lifted and lifted[0] == "fix" else None,
                    related_to=lifted[1] if lifted and lifted[0] == "related" else None),
        )

    # ---------------------------------------------------------------- pages
    def find_page(self, key: str, corpus: str | None = None) -> Page | None:
        return pages_mod.find_page(self.pages, key, corpus)

    def resolve(self, ids: list[str], corpus: str) -> list[SourceRef]:
        return pages_mod.resolve(self.pages, ids, corpus)

    def page(self, key: str) -> PageResponse:
        """The page ``key`` names: its key or a link to it (:func:`kwiki.index.pages.lookup`)."""
        return pages_mod.page_response(self.pages, self.artifacts, key)
