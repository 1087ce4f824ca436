import pytest

from kwiki.index.fusion import rollup, rrf


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
