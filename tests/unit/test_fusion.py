import pytest

from kwiki.index.fusion import convex, rollup, rrf


def test_rrf_matches_a_hand_computed_case():
    scores = rrf([["a", "b", "c"], ["c", "a"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert sorted(scores, key=scores.get, reverse=True) == ["a", "c", "b"]


def test_rrf_weights():
    scores = rrf([["a"], ["b"]], k=0, weights=[1.0, 2.0])
    assert scores == {"a": 1.0, "b": 2.0}


def test_rollup_takes_best_chunk_plus_a_little_of_the_next():
    pages = rollup([("p", "p#0", 1.0), ("p", "p#1", 0.4), ("p", "p#2", 0.2), ("p", "p#3", 0.1), ("q", "q#0", 1.1)],
                   extra_weight=0.25)
    assert pages["p"] == pytest.approx(1.0 + 0.25 * (0.4 + 0.2))
    assert pages["q"] == pytest.approx(1.1)


def test_convex_matches_a_hand_computed_case():
    # bm25 scores 8, 4, 2 -> 1, 1/3, 0; cosines 0.9, 0.5 -> 1, 0
    scores = convex([[("a", 8.0), ("b", 4.0), ("c", 2.0)], [("c", 0.9), ("a", 0.5)]], [0.4, 0.6])
    assert scores["a"] == pytest.approx(0.4 * 1.0 + 0.6 * 0.0)
    assert scores["b"] == pytest.approx(0.4 / 3)
    assert scores["c"] == pytest.approx(0.6)
    assert sorted(scores, key=scores.get, reverse=True) == ["c", "a", "b"]


def test_convex_keeps_a_standout_that_one_list_missed():
    # RRF would put "both" (ranks 2 and 2) above "vec-only" (rank 1 in one list); the score gap says otherwise
    bm25 = [("bm", 10.0), ("both", 9.0), ("x", 1.0)]
    vec = [("vec-only", 0.95), ("both", 0.40), ("y", 0.35)]
    fused = convex([bm25, vec], [0.45, 0.55])
    assert fused["vec-only"] > fused["both"]
    ranked = rrf([[d for d, _ in bm25], [d for d, _ in vec]])
    assert ranked["both"] > ranked["vec-only"]


def test_convex_with_one_empty_list_or_equal_scores():
    assert convex([[], [("a", 0.3), ("b", 0.1)]], [0.5, 0.5]) == {"a": 0.5, "b": 0.0}
    assert convex([[("a", 2.0), ("b", 2.0)], []], [1.0, 1.0]) == {"a": 1.0, "b": 1.0}
