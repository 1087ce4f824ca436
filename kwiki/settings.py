"""One typed settings object, read by the CLI, the service and the tests.

Every field can come from the environment with the ``KWIKI_`` prefix; :func:`load_settings` is the one way to
obtain them (the environment read now, plus a caller's overrides)::

    KWIKI_INDEX_DIR=/srv/kwiki/index kwiki serve
    >>> from kwiki.settings import load_settings
    >>> load_settings(index_dir="/tmp/idx", port=None).index_dir
    PosixPath('/tmp/idx')

The defaults that code elsewhere also needs (a build's page limit, the embedding threads) are declared here
once, as constants, and used both as the field's default and as the functions' default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

#: The checkout root when kwiki runs from a source tree (editable install).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: True in a source checkout (the layout pyproject.toml maps onto ``kwiki.*``); False when installed from the wheel.
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "service" / "cli.py").is_file()
#: The embedded corpus: ``corpus/`` of the checkout, or its copy that the wheel ships inside the package (package data).
EMBEDDED_CORPUS = REPO_ROOT / "corpus" if IN_CHECKOUT else Path(__file__).resolve().parent / "corpus"
#: onnxruntime threads for embedding: the 2-core machines kwiki is measured on (README, Performance).
EMBED_THREADS = 2
#: A corpus file larger than this is skipped at ingest and reported: a page is prose, not a data dump.
MAX_PAGE_BYTES = 8 * 1024 * 1024
#: A request body (an NCU export upload) larger than this is refused with 413: `ncu -k NAME -c N` keeps exports small.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
#: Pages a search returns when the caller does not say: one screen, and what the evals score (nDCG@10).
DEFAULT_K = 10
#: Most pages one search may return: beyond this the tail is noise and the response grows past a screenful of JSON.
MAX_K = 100
#: Longer queries are refused: a pasted NCU details section fits, a whole report does not (upload it to /diagnose).
MAX_QUERY_CHARS = 2000
#: Pages attached to each signal of a diagnosis: the pattern, its fix and one more.
PAGES_PER_SIGNAL = 5
#: Ledger candidates a tiered search returns beside the pages (what was tried on the same problem), and the most it may.
EXPERIENCE_K = 5
MAX_EXPERIENCE_K = 50
#: Knowledge pages above the candidates in `kwiki ledger search`: the direction; the candidates are the point.
LEDGER_PAGES = 5
#: A vector table of a build (chunks; sentences and listed questions) with at least this many rows also gets an
#: approximate index (``index.vectors.create_ann_index``) and search uses it: exact search is one product over every
#: row, linear in the rows, and at 62,560 chunks it took 22 ms p50 on the 2 cores (benchmarks/results/scale-1-10.json),
#: the whole p50 budget of GET /search (19.8 ms at 6k chunks, README), against 0.27 ms at 6,256.
ANN_MIN_ROWS = 50_000


def _default_index_dir() -> Path:
    # In a checkout the index lives beside the code (ignored by git); installed as a tool (pipx, uv tool), in the
    # user's data directory: $XDG_DATA_HOME/kwiki/index, ~/.local/share/kwiki/index on Linux (platformdirs).
    if IN_CHECKOUT:
        return REPO_ROOT / ".kwiki" / "index"
    import platformdirs

    return Path(platformdirs.user_data_dir("kwiki", appauthor=False)) / "index"


def _default_corpora() -> list[Path]:
    return [EMBEDDED_CORPUS]


class Settings(BaseSettings):
    """kwiki's configuration; defaults suit a checkout on a laptop or a 2-core CI box."""

    model_config = SettingsConfigDict(env_prefix="KWIKI_", extra="ignore")

    index_dir: Path = Field(default_factory=_default_index_dir, description="Root of the index builds")
    corpora: list[Path] = Field(default_factory=_default_corpora, description="Corpus roots to ingest")
    host: str = Field(default="127.0.0.1", description="Address `kwiki serve` binds (loopback: nothing else reaches it)")
    port: int = Field(default=8000, description="Port `kwiki serve` listens on")
    url: str | None = Field(default=None, description="The kwiki server the CLI asks (`kwiki search --url`); unset: "
                            "http://HOST:PORT when a server answers there with the local index's build, else in process")
    embed_threads: int = Field(default=EMBED_THREADS, ge=1, description="onnxruntime intra-op threads for embedding")
    model_cache: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "kwiki" / "models",
        description="Where the ONNX export of the embedding model is kept (made once, in seconds)",
    )
    embed_adapter: str | None = Field(
        default="lora-r16-e8", description="Domain adapter folded into the embedding model (index/adapters/NAME.npz, "
        "trained by evals/embedder/train.py); 'none': the base all-MiniLM-L6-v2. Part of the build's model id")
    max_query_chars: int = Field(default=MAX_QUERY_CHARS, ge=16, description="Longer queries are refused (a pasted report fits)")
    max_k: int = Field(default=MAX_K, ge=1, description="Most pages one search may return")
    max_upload_bytes: int = Field(default=MAX_UPLOAD_BYTES, ge=1024, description="Larger request bodies get a 413")
    max_page_bytes: int = Field(default=MAX_PAGE_BYTES, ge=1024, description="Larger files are skipped at ingest")
    ann_min_rows: int = Field(default=ANN_MIN_ROWS, ge=1, description="A vector table of at least this many rows gets "
                              "an approximate index at ingest, which search then uses (smaller: exact search)")
    admin_token: str | None = Field(default=None, description="Enables state-changing endpoints when set")
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Origins allowed by CORS: a comma-separated list or a JSON list")
    request_timeout_s: float = Field(default=10.0, gt=0, description="Deadline of a search or a diagnosis")
    max_connections: int = Field(default=512, ge=1, description="Open connections served; one more gets 503 (kwiki serve)")
    header_timeout_s: float = Field(default=10.0, gt=0, description="A connection with no whole request head by then is closed")
    body_timeout_s: float = Field(default=60.0, gt=0, description="A request body still arriving this long after the "
                                  "head deadline is answered 408 and closed (20 MiB at 1 MB/s fits)")
    builds_dir: Path | None = Field(default=None, description="The store of published builds (`kwiki publish` writes "
                                    "<builds_dir>/<build id>, never changed after; replicas load from it): a folder shared "
                                    "by the replicas of a host; default <index_dir>/published")
    build: str | None = Field(default=None, description="The published build this replica serves (`kwiki serve --build`); "
                              "/health is 503 `build_not_loaded` until it is loaded. Unset: the index root's `current` build")
    lb_socket: Path | None = Field(default=None, description="haproxy's admin socket (`stats socket PATH level admin`) "
                                   "that `kwiki rollout` takes replicas out of rotation and back through")
    lb_backend: str = Field(default="kwiki", description="The haproxy backend whose servers are the replicas")
    ledger_dir: Path | None = Field(default=None, description="Candidate ledger workspace, a folder holding its SQLite "
                                    "file ledger.sqlite3 (default: <index_dir>/../ledger); unused when ledger_url is set")
    ledger_url: str | None = Field(default=None, description="A shared ledger on PostgreSQL for a team, e.g. "
                                   "postgresql://kwiki@db.example/kwiki (libpq URL; ?options=-csearch_path%3Dteam_a keeps several "
                                   "ledgers in one database); unset: the workspace's SQLite file")

    @field_validator("embed_adapter", mode="before")
    @classmethod
    def _no_adapter(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("", "none") else value

    @field_validator("build", mode="before")
    @classmethod
    def _build(cls, value: object) -> object:
        return (value.strip() or None) if isinstance(value, str) else value

    @property
    def published_dir(self) -> Path:
        """Where published builds are: ``builds_dir``, else ``<index_dir>/published``."""
        return Path(self.builds_dir) if self.builds_dir else Path(self.index_dir) / "published"

    @field_validator("ledger_url", mode="before")
    @classmethod
    def _ledger_url(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip() or None
            if value and not value.startswith(("postgresql://", "postgres://")):
                raise ValueError("KWIKI_LEDGER_URL must be a PostgreSQL URL such as postgresql://user@host:5432/kwiki; "
                                 "leave it unset for the workspace's SQLite file")
        return value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: object) -> object:
        """``https://a.example,https://b.example`` or ``["https://a.example"]``; each must be an http(s) origin."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except ValueError:
                    raise ValueError("KWIKI_CORS_ORIGINS is not a JSON list; give origins separated by commas, "
                                     "e.g. https://a.example,https://b.example") from None
            else:
                value = [v.strip() for v in text.split(",") if v.strip()]
        if isinstance(value, list):
            for origin in value:
                if not isinstance(origin, str) or not (origin == "*" or origin.startswith(("http://", "https://"))):
                    raise ValueError(f"CORS origin {origin!r} is not an http(s) origin such as https://a.example")
        return value


def load_settings(**overrides: Any) -> Settings:
    """The settings: the environment (``KWIKI_*``) read now, with the given overrides (None means not given)."""
    return Settings(**{name: value for name, value in overrides.items() if value is not None})
