"""The embedding path: onnxruntime gives the model's own vectors, in input order, from the text we choose."""

from __future__ import annotations

import numpy as np
import pytest

from kwiki.index.build import embed_text
from kwiki.index.params import RankingParams
from kwiki.index.vectors import DIM, MAX_TOKENS, model_path, onnx_model

P = RankingParams()

TEXTS = [
    "tail effect",
    "x",
    "Only 8 of my 132 SMs are busy during the final part of the kernel; the rest sit idle.",
    "smsp__pcsamp_warps_issue_stalled_long_scoreboard is 45% in my attention kernel",
    # longer than the model's window: both sides must truncate the same way
    " ".join(["The producer warp issues TMA loads into a ring of shared-memory stages"] * 40),
]


@pytest.mark.slow
def test_onnx_vectors_match_sentence_transformers(base_embedder):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)
    reference.max_seq_length = MAX_TOKENS
    want = reference.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    got = base_embedder.encode(TEXTS)
    assert got.shape == (len(TEXTS), DIM) and got.dtype == np.float32
    cosine = (got * want).sum(axis=1)
    assert cosine.min() > 0.9999, cosine
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)


@pytest.mark.slow
def test_the_adapted_export_is_the_base_model_with_the_adapter_merged(embedder, base_embedder):
    """The shipped model: sentence-transformers' model with the LoRA update added to its weights gives the ONNX
    export's vectors, and they differ from the base model's (the adapter is really applied)."""
    from sentence_transformers import SentenceTransformer

    from kwiki.index import adapter

    assert embedder.adapter and embedder.model_id.endswith("+" + embedder.adapter)
    reference = SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)
    reference.max_seq_length = MAX_TOKENS
    bert = reference[0].auto_model
    state = bert.state_dict()
    assert adapter.merge(state, embedder.adapter) > 0
    bert.load_state_dict(state)
    want = reference.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    got = embedder.encode(TEXTS)
    assert (got * want).sum(axis=1).min() > 0.9999
    assert (got * base_embedder.encode(TEXTS)).sum(axis=1).min() < 0.999


def test_encode_keeps_input_order_despite_length_sorting(embedder):
    together = embedder.encode(TEXTS)
    one_by_one = np.concatenate([embedder.encode([t]) for t in TEXTS])
    assert np.allclose(together, one_by_one, atol=1e-4)
    assert embedder.encode([]).shape == (0, DIM)


def test_export_is_made_once_and_reused(embedder):
    path = onnx_model()
    before = path.stat().st_mtime_ns
    assert onnx_model() == path and path.stat().st_mtime_ns == before


def test_model_sees_prose_not_file_lists_or_checkboxes():
    text = "Fuses the epilogue.\n- `csrc/gemm/sm90_epilogue.cuh`\n* python/kernels/moe.py (new)\n- [x] tests pass\nSee `a/b.cu` for the loop."
    seen = embed_text("Fuse epilogue", ["Changed Files"], text)
    assert seen == "Fuse epilogue. Changed Files\nFuses the epilogue.\nSee `a/b.cu` for the loop."
    assert embed_text("T", [], "body") == "T\nbody"


def test_several_query_vectors_score_the_mean():
    from kwiki.index.vectors import VectorIndex

    eye = np.eye(DIM, dtype=np.float32)
    index = VectorIndex(eye[:3])  # chunk i is the unit vector e_i
    plain = dict(index.search(eye[0], 3, None, P))
    assert plain[0] == pytest.approx(1.0) and plain[1] == pytest.approx(0.0)
    clauses = dict(index.search(np.stack([eye[1], eye[1], eye[2]]), 3, None, P))  # two of three clauses say what chunk 1 says
    assert clauses[1] == pytest.approx(2 / 3) and clauses[2] == pytest.approx(1 / 3) and clauses[0] == pytest.approx(0.0)
    assert dict(index.search(eye[:1], 3, None, P)) == plain  # one row is the single-vector case


def test_sentences_stand_for_their_chunk_for_every_clause_and_clause_scores_see_them():
    from kwiki.index.vectors import VectorIndex

    eye = np.eye(DIM, dtype=np.float32)
    # chunk 0 has a sentence saying e_3 and a listed question saying e_4; chunk 1 has none
    index = VectorIndex(eye[:2], np.stack([eye[3], eye[4]]), np.array([0, 0]), ["s", "q?"], np.array([False, True]))
    scores = index._scores(np.stack([eye[3], eye[4], eye[1]]), P, sentences=True)  # chunks x clauses
    assert scores[0].tolist() == pytest.approx([1 - P.sentence_margin, 1 - P.question_margin, 0.0])
    assert scores[1].tolist() == pytest.approx([0.0, 0.0, 1.0])
    off = index._scores(np.stack([eye[3], eye[4]]), P, sentences=False, questions=False)
    assert off[0].tolist() == pytest.approx([0.0, 0.0])
    # which clause a page (here chunk 0) answers: its sentences and questions count, with no margin
    assert index.clause_scores(np.array([0]), np.stack([eye[4], eye[1]])).tolist() == pytest.approx([1.0, 0.0])
    assert index.clause_scores(np.array([], dtype=np.int64), eye[:2]).tolist() == [-1.0, -1.0]  # a page with no chunk


def test_a_page_whose_sections_cover_every_clause_ranks_up():
    from kwiki.index.vectors import VectorIndex

    eye = np.eye(DIM, dtype=np.float32)
    # page 0: chunk 0 says clue A, chunk 1 says clue B; page 1: chunk 2 says both half-way
    both = (eye[0] + eye[1]) / np.sqrt(2)
    index = VectorIndex(np.stack([eye[0], eye[1], both]))
    clauses, pages = np.stack([eye[0], eye[1]]), np.array([0, 0, 1])
    alone = dict(index.search(clauses, 3, None, P))
    assert alone[2] > alone[0] == alone[1]  # chunk by chunk, the page that says both at once wins
    blended = dict(index.search(clauses, 3, None, P, pages=pages))
    assert blended[0] == pytest.approx((1 - P.clause_page_share) * 0.5 + P.clause_page_share * 1.0)
    assert blended[0] > blended[2] == pytest.approx(alone[2])
    assert dict(index.search(eye[0], 3, None, P, pages=pages)) == dict(index.search(eye[0], 3, None, P))  # one vector: no blending
