"""The paired bootstrap margin that the eval report prints next to the test-split tables."""

from kwiki.evals.questions import Question
from kwiki.evals.runner import margin


def _questions(n: int) -> list[Question]:
    return [Question(id=f"q{i}", query="q", category="symptom", split="test", relevant={"p": 2}) for i in range(n)]


def _per_q(a: list[float], b: list[float]) -> dict:
    return {"m": {f"q{i}": {"nDCG@10": x} for i, x in enumerate(a)},
            "base": {f"q{i}": {"nDCG@10": x} for i, x in enumerate(b)}}


def test_a_constant_difference_has_no_spread():
    m = margin(_questions(20), _per_q([0.9] * 20, [0.5] * 20), "m", "base")
    assert m == {"mean": 0.4, "low": 0.4, "high": 0.4, "n": 20}


def test_the_interval_brackets_the_mean_and_narrows_with_more_questions():
    a = [1.0, 0.0] * 10
    small = margin(_questions(20), _per_q(a, [0.5] * 20), "m", "base")
    big = margin(_questions(200), _per_q(a * 10, [0.5] * 200), "m", "base")
    assert small["mean"] == big["mean"] == 0.0
    assert small["low"] < 0 < small["high"]
    assert big["high"] - big["low"] < small["high"] - small["low"]
    assert margin(_questions(20), _per_q(a, [0.5] * 20), "m", "base") == small  # seeded: reproducible


def test_no_questions_gives_zero():
    assert margin([], {"m": {}, "base": {}}, "m", "base")["n"] == 0
