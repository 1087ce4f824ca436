"""The quality gate: the shipped method must not fall below the floor stored in evals/floor.yaml."""

import pytest

from kwiki.evals.command import load_floor
from kwiki.evals.questions import CATEGORIES, SPLITS, load_suite, load_unanswerable, to_trec
from kwiki.evals.runner import SHIPPED, evaluate, floor_rates, margin

pytestmark = pytest.mark.slow


def test_question_files_are_well_formed():
    for suite, minimum in (("corpus", 150), ("kernelwiki", 60)):
        qs = load_suite(suite)
        assert len(qs) >= minimum
        assert all(q.category in CATEGORIES and q.split in SPLITS and q.relevant for q in qs)
        # written from a page: that page answers it (real users' questions may have only partial answers)
        assert all(2 in q.relevant.values() for q in qs if q.split != "real")
        assert {"dev", "test", "fresh"} <= {q.split for q in qs}
        assert len(to_trec(qs).splitlines()) == sum(len(q.labels) for q in qs)


def test_labels_point_at_real_pages(searcher):
    ids = {p.id for p in searcher.pages.values()}
    missing = {d for q in load_suite("corpus") for d in q.relevant if d not in ids}
    assert not missing


def test_shipped_method_is_above_the_floor(searcher):
    rule = load_floor()["corpus"]
    assert rule["method"] == SHIPPED
    result = evaluate(searcher, load_suite("corpus"), [SHIPPED, "keyword-baseline"])
    value = result["overall"][SHIPPED][rule.get("group", "all")][rule.get("measure", "nDCG@10")]
    assert value >= rule["floor"], f"nDCG@10 {value:.4f} fell below the floor {rule['floor']}"
    # better than the keyword baseline beyond the noise: the whole 95% interval of the paired margin above 0
    lead = margin(load_suite("corpus"), result["per_question"], SHIPPED, "keyword-baseline")
    assert lead["low"] > 0, lead


def test_the_relevance_floor_hides_no_answer_and_flags_most_off_topic_queries(searcher):
    questions = [q for q in load_suite("corpus") if q.split in ("dev", "test", "fresh")]
    result = evaluate(searcher, questions, [SHIPPED])
    rates = floor_rates(searcher, questions, result["no_match"], load_unanswerable())
    assert rates["n_unanswerable"] >= 50 and rates["unanswerable"] >= 0.7, rates
    # a wrongly hidden answer is worse than a padded list: at most 1 in 200 written questions
    assert max(rates["answerable"].values()) <= 0.005, rates
