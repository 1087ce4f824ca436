"""The embedding adapter: LoRA matrices folded into the weights, named in the model id, refused when they do not fit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kwiki.errors import IndexIncompatible
from kwiki.index import adapter, vectors


@pytest.fixture
def adapters(tmp_path, monkeypatch):
    monkeypatch.setattr(adapter, "ADAPTERS_DIR", tmp_path)
    a = np.array([[1.0, 0.0, 2.0]], dtype=np.float32)  # rank 1, in = 3
    b = np.array([[1.0], [3.0]], dtype=np.float32)  # out = 2
    np.savez(tmp_path / "tiny.npz", scaling=np.array(2.0), meta=np.array(json.dumps({"pairs": 7})),
             **{"layer.weight.A": a, "layer.weight.B": b})
    return tmp_path


def test_merge_adds_scaling_times_b_at_a(adapters):
    state = {"layer.weight": torch.ones(2, 3)}
    assert adapter.merge(state, "tiny") == 1
    assert state["layer.weight"].tolist() == [[3.0, 1.0, 5.0], [7.0, 1.0, 13.0]]  # 1 + 2 * (B @ A)
    assert adapter.meta("tiny") == {"pairs": 7} and adapter.known() == ["tiny"]
    assert len(adapter.digest("tiny")) == 10


def test_an_adapter_for_another_model_or_an_unknown_name_is_refused(adapters):
    with pytest.raises(IndexIncompatible, match="does not fit"):
        adapter.merge({"layer.weight": torch.ones(3, 3)}, "tiny")
    with pytest.raises(IndexIncompatible, match="unknown embedding adapter"):
        adapter.path_of("nope")


def test_the_model_id_names_the_adapter_and_back():
    assert vectors.adapter_of(vectors.model_id("tiny")) == "tiny"
    assert vectors.adapter_of(vectors.model_id(None)) is None
