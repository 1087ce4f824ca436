"""Signal definitions (``signals.yaml``): titles, pattern pages, symptoms, phrases and thresholds.

    >>> from kwiki.profiling.signals import load_signals
    >>> sigs = load_signals()
    >>> sigs["tail-effect"].patterns[0]
    'pattern-tail-effect'
    >>> sigs["long-scoreboard"].threshold("stall_share")
    0.3
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

SIGNALS_PATH = Path(__file__).with_name("signals.yaml")

SIGNAL_IDS = (
    "small-grid", "tail-effect", "load-imbalance", "uncoalesced-global", "sparse-stores", "smem-bank-conflicts",
    "long-scoreboard", "mio-throttle", "short-scoreboard", "lg-throttle", "dram-bound", "l2-bound", "cache-thrashing",
    "fma-bound", "tensor-pipe-bound", "tensor-pipe-underused", "register-spilling", "occupancy-registers",
    "occupancy-shared-memory", "occupancy-block-size", "warp-divergence", "barrier-stalls", "atomic-contention",
    "instruction-fetch-stalls", "launch-overhead", "membar-stalls", "math-pipe-throttle", "low-ipc", "speed-of-light",
)


class Threshold(BaseModel):
    value: float
    source: str
    note: str = ""


class SignalDef(BaseModel):
    id: str
    title: str
    patterns: list[str] = Field(default_factory=list)
    symptoms: list[str] = Field(default_factory=list)
    techniques: list[str] = Field(default_factory=list)
    phrases: list[str] = Field(default_factory=list)
    explains: list[str] = Field(default_factory=list)
    thresholds: dict[str, Threshold] = Field(default_factory=dict)

    def threshold(self, name: str) -> float:
        return self.thresholds[name].value

    def query_text(self, n_phrases: int = 4) -> str:
        """Search text for the signal: its title plus its first few phrases."""
        return " ".join([self.title, *self.phrases[:n_phrases]])

    def public(self) -> dict[str, Any]:
        return self.model_dump()


def as_list() -> list[dict[str, Any]]:
    """Every signal as plain data, with the catalog metrics that feed it (for ``GET /signals``)."""
    from .catalog import load_catalog

    feeds: dict[str, list[str]] = {}
    for m in load_catalog().metrics:
        for sig in m.feeds:
            feeds.setdefault(sig, []).append(m.primary)
    return [{**s.public(), "metrics": feeds.get(s.id, [])} for s in load_signals().values()]


@lru_cache(maxsize=4)
def load_signals(path: Path | None = None) -> dict[str, SignalDef]:
    """All signals by id, in file order."""
    data = yaml.safe_load(Path(path or SIGNALS_PATH).read_text(encoding="utf-8"))
    return {s["id"]: SignalDef(**s) for s in data["signals"]}
