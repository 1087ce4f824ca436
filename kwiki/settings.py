"""One typed settings object, read by the CLI, the service and the tests.

Every field can come from the environment with the ``KWIKI_`` prefix::

    KWIKI_INDEX_DIR=/srv/kwiki/index kwiki serve
    >>> from kwiki.settings import Settings
    >>> Settings(index_dir="/tmp/idx").index_dir
    PosixPath('/tmp/idx')
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The checkout root when kwiki runs from a source tree (editable install).
REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_index_dir() -> Path:
    # In a checkout the index lives beside the code (ignored by git); elsewhere in the user's cache.
    if (REPO_ROOT / "pyproject.toml").exists():
        return REPO_ROOT / ".kwiki" / "index"
    return Path.home() / ".cache" / "kwiki" / "index"


def _default_corpora() -> list[Path]:
    return [REPO_ROOT / "corpus"]


class Settings(BaseSettings):
    """kwiki's configuration; defaults suit a checkout on a laptop or a 2-core CI box."""

    model_config = SettingsConfigDict(env_prefix="KWIKI_", extra="ignore")

    index_dir: Path = Field(default_factory=_default_index_dir, description="Root of the index builds")
    corpora: list[Path] = Field(default_factory=_default_corpora, description="Corpus roots to ingest")
    host: str = "127.0.0.1"
    port: int = 8000
    embed_threads: int = Field(default=2, ge=1, description="onnxruntime intra-op threads for embedding")
    model_cache: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "kwiki" / "models",
        description="Where the ONNX export of the embedding model is kept (made once, in seconds)",
    )
    embed_adapter: str | None = Field(
        default=None, description="Domain adapter folded into the embedding model (index/adapters/NAME.npz); "
        "None or 'none': the base all-MiniLM-L6-v2. Part of the build's model id: a change rebuilds")
    max_query_chars: int = Field(default=2000, ge=16)
    max_k: int = Field(default=100, ge=1)
    max_upload_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    max_page_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description="Larger files are skipped at ingest")
    admin_token: str | None = Field(default=None, description="Enables state-changing endpoints when set")
    cors_origins: list[str] = Field(default_factory=list)
    request_timeout_s: float = Field(default=10.0, gt=0)
    ledger_dir: Path | None = Field(default=None, description="Candidate ledger workspace (default: <index_dir>/../ledger)")

    @field_validator("embed_adapter", mode="before")
    @classmethod
    def _no_adapter(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("", "none") else value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()
