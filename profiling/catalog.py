"""The catalog of Nsight Compute metrics kwiki understands (``catalog.yaml``).

Every metric has a canonical id (``achieved_occupancy``, ``stall_long_scoreboard``), the
ncu names per chip, older/newer spellings and the labels the ``--page details`` CSV uses.
:meth:`Catalog.resolve` maps any of those to the canonical id, tolerating rollup and unit
suffixes (``.sum``, ``.avg``, ``.ratio``, ``.pct``, ``.pct_of_peak_sustained_elapsed``, a
trailing ``[%]`` or ``(usecond)``).

    >>> from kwiki.profiling.catalog import load_catalog
    >>> cat = load_catalog()
    >>> cat.resolve("smsp__pcsamp_warps_issue_stalled_long_scoreboard")
    'stall_long_scoreboard_samples'
    >>> cat.resolve("Achieved Occupancy")
    'achieved_occupancy'
    >>> cat.resolve("Memory Throughput", section="Memory Workload Analysis")
    'dram_bytes_per_second'
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")

#: suffixes stripped, one at a time, when an exact lookup fails
_ROLLUP_SUFFIXES = (
    ".pct_of_peak_sustained_elapsed", ".pct_of_peak_sustained_active", ".pct_of_peak_sustained_region",
    ".per_cycle_active", ".per_cycle_elapsed", ".per_second", ".peak_sustained",
    ".ratio", ".pct", ".sum", ".avg", ".max", ".min",
)
_UNIT_TAIL = re.compile(r"\s{0,40}[\[(][^\])]{0,40}[\])]\s{0,40}$")  # bounded: names come from uploads


class MetricDef(BaseModel):
    """One canonical metric."""

    id: str
    names: dict[str, str] = Field(default_factory=dict)
    other_names: list[str] = Field(default_factory=list)
    display_names: list[str] = Field(default_factory=list)
    unit: str = ""
    meaning: str = ""
    feeds: list[str] = Field(default_factory=list)

    def all_names(self) -> list[str]:
        """Every spelling, ncu names first."""
        seen: dict[str, None] = {}
        for n in [*self.names.values(), *self.other_names, *self.display_names]:
            seen.setdefault(n, None)
        return list(seen)

    @property
    def primary(self) -> str:
        """The name to show a user (sm_90 first, else any chip's, else the id)."""
        for chip in ("sm_90", "sm_100", "sm_80", "sm_120"):
            if chip in self.names:
                return self.names[chip]
        return self.other_names[0] if self.other_names else self.id


def _norm(name: str) -> str:
    return " ".join(str(name).strip().strip('"').lower().split())


class Catalog(BaseModel):
    """All metrics plus lookup tables built once at load time."""

    version: int = 1
    stall_reasons: list[str]
    metrics: list[MetricDef]
    by_id: dict[str, MetricDef] = Field(default_factory=dict, exclude=True)
    lookup: dict[str, str] = Field(default_factory=dict, exclude=True)
    #: Metrics some ncu capture holds (a name on some chip); the rest (unique_bytes) only a user can supply.
    capturable: frozenset[str] = Field(default_factory=frozenset, exclude=True)

    def model_post_init(self, __context: Any) -> None:  # noqa: D401 - pydantic hook
        self.by_id = {m.id: m for m in self.metrics}
        self.capturable = frozenset(m.id for m in self.metrics if m.names)
        table: dict[str, str] = {}
        for m in self.metrics:
            table.setdefault(_norm(m.id), m.id)
            for n in m.all_names():
                table.setdefault(_norm(n), m.id)
        self.lookup = table

    def __len__(self) -> int:
        return len(self.metrics)

    def get(self, metric_id: str) -> MetricDef | None:
        return self.by_id.get(metric_id)

    def resolve(self, name: str, section: str | None = None, strict: bool = False) -> str | None:
        """Canonical id for ``name`` (any spelling), or None.

        ``section`` disambiguates details-page labels used by two sections
        ("Memory Throughput" is a percent in Speed of Light, bytes/s in Memory Workload Analysis).
        ``strict`` (used by the file parsers, where ``.min``/``.max``/``.per_second`` columns sit
        next to the real one) only adds or drops one trailing ``.sum``/``.ratio``/``.pct``.
        """
        if not isinstance(name, str) or not name.strip() or len(name) > 300:
            return None
        key = _norm(name)
        if section:
            hit = self.lookup.get(f"{_norm(section)}/{key}")
            if hit:
                return hit
        hit = self.lookup.get(key)
        if hit:
            return hit
        stripped = _UNIT_TAIL.sub("", key)
        if stripped != key and (hit := self.lookup.get(stripped)):
            return hit
        if strict:
            for suf in (".sum", ".ratio", ".pct"):
                if stripped.endswith(suf) and (hit := self.lookup.get(stripped[: -len(suf)])):
                    return hit
                if hit := self.lookup.get(stripped + suf):
                    return hit
            return None
        # rollup / submetric variants: try removing suffixes, then adding common ones back
        base = stripped
        for _ in range(3):
            for suf in _ROLLUP_SUFFIXES:
                if base.endswith(suf):
                    base = base[: -len(suf)]
                    if hit := self.lookup.get(base):
                        return hit
                    for add in (".sum", ".avg", ".ratio", ".pct"):
                        if hit := self.lookup.get(base + add):
                            return hit
                    break
            else:
                break
        return None

    def rank(self, metric_id: str, name: str) -> int:
        """Position of ``name`` among the spellings of ``metric_id`` (lower = more canonical)."""
        m = self.by_id.get(metric_id)
        if m is None:
            return 10**6
        low = [_norm(n) for n in m.all_names()]
        key = _norm(name)
        return low.index(key) if key in low else len(low)

    def names_for_routing(self) -> dict[str, str]:
        """Raw ncu metric names (containing ``__``) -> canonical id, for free-text matching."""
        return {k: v for k, v in self.lookup.items() if "__" in k}

    def as_list(self) -> list[dict[str, Any]]:
        """Plain dicts for ``GET /signals`` and ``kwiki signals``."""
        return [m.model_dump() for m in self.metrics]


@lru_cache(maxsize=4)
def load_catalog(path: Path | None = None) -> Catalog:
    """Load and cache ``catalog.yaml`` (or ``path``)."""
    data = yaml.safe_load(Path(path or CATALOG_PATH).read_text(encoding="utf-8"))
    return Catalog(version=data.get("version", 1), stall_reasons=data["stall_reasons"],
                   metrics=[MetricDef(**m) for m in data["metrics"]])
