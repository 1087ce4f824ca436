"""The manifest that makes an index folder explain itself, checked on every open."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from kwiki.errors import IndexIncompatible, IndexMissing

SCHEMA_VERSION = 6  # 4: sentence-vector table; 5: pages' questions (BM25 field, vectors); 6: page-level BM25 index
MANIFEST = "manifest.json"
#: The link in an index root to the build being served (switched by an atomic rename, ``index.build``).
CURRENT = "current"


class Manifest(BaseModel):
    schema_version: int = SCHEMA_VERSION
    kwiki_version: str
    model: str
    model_dim: int
    chunker_version: str
    #: What besides the corpus decided this build's contents (``build.build_fingerprint``); hashed into source_hash.
    fingerprint: dict[str, str] = Field(default_factory=dict)
    corpus_hash: str
    source_hash: str = ""  # hash of the raw files read; an equal hash means a rebuild would change nothing
    corpora: dict[str, str] = Field(default_factory=dict)  # name -> root
    counts: dict[str, int] = Field(default_factory=dict)
    pages_by_type: dict[str, int] = Field(default_factory=dict)
    embedded: int = 0  # chunks and sentences embedded in this build (the rest came from the cache)
    #: The approximate indexes of the build's vector tables by table name (``vectors.create_ann_index``: kind, rows,
    #: partitions); a table not named is searched exactly. Empty for a build under ``settings.ANN_MIN_ROWS`` rows.
    ann: dict[str, dict[str, int | str]] = Field(default_factory=dict)
    build_seconds: float = 0.0
    created_at: str
    build_id: str

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")


def current_build(index_dir: Path) -> Path:
    """The folder that ``current`` points at (it may not exist yet)."""
    link = index_dir / CURRENT
    return (index_dir / os.readlink(link)) if link.is_symlink() else link


def read_manifest(folder: Path) -> Manifest:
    """Read and check a build's manifest; raises a 503-class error that says what to do."""
    from kwiki.ingest.chunking import CHUNKER_VERSION

    from .vectors import MODEL_NAME

    path = folder / MANIFEST
    if not path.is_file():
        raise IndexMissing(f"no index at {folder}", hint="run `kwiki ingest` to build one")
    try:
        manifest = Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise IndexIncompatible(f"unreadable manifest at {path}: {exc}", hint="rebuild with `kwiki ingest`") from exc
    if manifest.schema_version != SCHEMA_VERSION:
        raise IndexIncompatible(
            f"index schema {manifest.schema_version}, this kwiki reads {SCHEMA_VERSION}",
            hint="rebuild with `kwiki ingest`",
        )
    if manifest.model.partition("+")[0] != MODEL_NAME or manifest.chunker_version != CHUNKER_VERSION:
        raise IndexIncompatible(
            f"index built with model {manifest.model} / chunker {manifest.chunker_version}",
            hint="rebuild with `kwiki ingest`",
        )
    return manifest
