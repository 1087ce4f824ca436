"""The embedding path: onnxruntime gives the model's own vectors, in input order, from the text we choose."""

from __future__ import annotations

import numpy as np
import pytest

from kwiki.index.params import RankingParams
from kwiki.index.vectors import DIM, MAX_TOKENS, model_path, onnx_model
from kwiki.index.writer import embed_text

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


class _Nearest:
    """An approximate index that names fixed rows whatever the limit (what ``AnnTable.nearest`` returns), recording
    its calls."""

    def __init__(self, name: str, rows: list[int]) -> None:
        self.name, self.rows, self.calls = name, np.array(rows, dtype=np.int64), 0

    def nearest(self, queries, limit, nprobes):
        self.calls += 1
        return np.tile(self.rows, len(queries))


def test_candidate_rows_are_scored_as_exact_search_scores_them():
    from kwiki.index.vectors import VectorIndex

    rng = np.random.default_rng(7)
    m = rng.normal(size=(40, DIM)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    sents = rng.normal(size=(30, DIM)).astype(np.float32)
    sents /= np.linalg.norm(sents, axis=1, keepdims=True)
    srows = rng.integers(0, 40, size=30)
    qs = rng.normal(size=(3, DIM)).astype(np.float32)
    exact = VectorIndex(m, sents, srows, [f"s{i}" for i in range(30)], np.arange(30) % 4 == 0)
    rows = np.array([0, 3, 4, 17, 39])
    assert exact._row_scores(rows, qs, P, True) == pytest.approx(exact._scores(qs, P, True)[rows])
    assert exact._row_scores(rows, qs, P, False, False) == pytest.approx(exact._scores(qs, P, False, False)[rows])
    # with an index that names every row, search and page_max give exact search's answer
    pages = np.arange(40) // 4
    ann = VectorIndex(m, sents, srows, [f"s{i}" for i in range(30)], np.arange(30) % 4 == 0,
                      ann_chunks=_Nearest("chunks", list(range(40))), exact_below=5)  # type: ignore[arg-type]
    def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
        return [r for r, _ in a] == [r for r, _ in b] and [s for _, s in a] == pytest.approx([s for _, s in b])

    for q in (qs, qs[0]):
        assert same(ann.search(q, 10, None, P, pages=pages), exact.search(q, 10, None, P, pages=pages))
    assert same(ann.page_max(qs[0], pages, 10, None, 5, P), exact.page_max(qs[0], pages, 10, None, 5, P))
    assert ann.describe(P).startswith("ivf_flat (chunks") and exact.describe(P) == "exact"


def test_the_approximate_path_scores_only_the_rows_its_index_names_and_a_small_filter_goes_exact():
    from kwiki.index.vectors import VectorIndex

    eye = np.eye(DIM, dtype=np.float32)
    m = eye[:8]
    chunks, sentences = _Nearest("chunks", [2, 5]), _Nearest("sentences", [1])
    # sentence 0 stands for chunk 6, sentence 1 (a listed question) for chunk 7
    index = VectorIndex(m, np.stack([eye[10], eye[11]]), np.array([6, 7]), ["s", "q?"], np.array([False, True]),
                        ann_chunks=chunks, ann_sentences=sentences, exact_below=3)  # type: ignore[arg-type]
    assert index.ann_rows(eye[:1], 10, None, P).tolist() == [2, 5, 7]
    assert index.ann_rows(eye[:1], 10, None, P, questions=False).tolist() == [2, 5]
    hits = dict(index.search(eye[5], 10, None, P))
    assert set(hits) == {2, 5, 7} and hits[5] == pytest.approx(1.0)  # chunk 0 (an exact match elsewhere) is not named
    small = np.zeros(8, dtype=bool)
    small[[0, 1]] = True  # a filter keeping 2 < exact_below rows: those rows, exactly
    calls = chunks.calls
    assert dict(index.search(eye[0], 10, small, P)) == pytest.approx({0: 1.0, 1: 0.0}) and chunks.calls == calls
    big = np.ones(8, dtype=bool)
    big[5] = False  # a filter keeping many rows: the index's rows it keeps
    assert set(dict(index.search(eye[5], 10, big, P))) == {2, 7}


def test_with_clauses_every_chunk_of_a_candidate_page_is_scored_for_the_page_blend():
    from kwiki.index.vectors import VectorIndex

    eye = np.eye(DIM, dtype=np.float32)
    # page 0: chunk 0 says clue A, chunk 1 says clue B; page 1: chunk 2 says neither; the index names chunk 0 only
    index = VectorIndex(np.stack([eye[0], eye[1], eye[5]]), ann_chunks=_Nearest("chunks", [0]), exact_below=1)  # type: ignore[arg-type]
    exact = VectorIndex(np.stack([eye[0], eye[1], eye[5]]))
    clauses, pages = np.stack([eye[0], eye[1]]), np.array([0, 0, 1])
    got = dict(index.search(clauses, 3, None, P, pages=pages))
    assert set(got) == {0, 1}  # chunk 1 scored because its page is a candidate; page 1 is not
    assert got == pytest.approx({r: s for r, s in exact.search(clauses, 3, None, P, pages=pages) if r in got})
    assert set(dict(index.search(eye[0], 3, None, P, pages=pages))) == {0}  # one vector: no blend, the named rows
