"""The lineage tree: parents, the promoted path, missing parents, cycles, deep chains."""

from __future__ import annotations

from kwiki.ledger import Candidate, Ledger, lineage, render_tree

from .conftest import LEDGER


def _trees():
    return {t.task: t for t in lineage(Ledger(LEDGER).read().candidates)}


def test_one_tree_per_task_with_every_candidate_once():
    trees = _trees()
    assert set(trees) == {"transpose", "gemm-bf16"}
    assert trees["transpose"].size == 17 and trees["gemm-bf16"].size == 19
    for tree in trees.values():
        keys = [r.key for r in tree.rows]
        assert len(keys) == len(set(keys)) == tree.size


def test_parents_and_depths_follow_the_records():
    rows = {r.key: r for r in _trees()["transpose"].rows}
    assert rows["transpose/t00"].depth == 0 and rows["transpose/t00"].parent is None
    assert rows["transpose/t12"].parent == "transpose/t10" and rows["transpose/t12"].depth == 5
    assert rows["transpose/t03"].children == ["transpose/t05", "transpose/t06", "transpose/t07"]
    # pre-order: every row comes after its parent
    order = [r.key for r in _trees()["transpose"].rows]
    assert all(order.index(r.parent) < order.index(r.key) for r in rows.values() if r.parent)


def test_the_promoted_path_is_marked():
    t = _trees()["transpose"]
    on_path = {r.id for r in t.rows if r.on_promoted_path}
    assert on_path == {"t00", "t01", "t03", "t07", "t11", "t15"}
    assert t.promoted_path("transpose/t15") == [f"transpose/{i}" for i in ("t00", "t01", "t03", "t07", "t11", "t15")]
    g = _trees()["gemm-bf16"]
    assert {r.id for r in g.rows if r.on_promoted_path} == {"g00", "g01", "g02", "g04", "g05", "g06", "g10", "g15"}
    assert "gemm-bf16/g03" not in {r.key for r in g.rows if r.on_promoted_path}


def test_a_missing_parent_makes_a_root_that_says_so():
    g = _trees()["gemm-bf16"]
    roots = {r.id: r for r in g.roots}
    assert set(roots) == {"g00", "g18"}
    assert roots["g18"].missing_parent == "gx9" and roots["g00"].missing_parent is None


def test_rendering_marks_the_path_and_shows_reasons():
    text = render_tree(lineage(Ledger(LEDGER).read().candidates), width=400)
    lines = text.splitlines()
    assert lines[0].startswith("transpose  (17 candidates, 6 promoted)")
    assert any(ln.endswith("* t15 [promoted] cache-streaming stores (st.global.cs) so the output does not evict the input from L2") for ln in lines)
    t04 = next(ln for ln in lines if " t04 " in ln)
    assert "* t04" not in t04 and "[rejected]" in t04 and "no faster than padding" in t04
    assert "parent 'gx9' not in the ledger" in text
    # t12 is drawn under t10 (one level deeper) with a bar for t10's later siblings
    t10 = next(i for i, ln in enumerate(lines) if " t10 " in ln)
    assert lines[t10 + 1].index("t12") > lines[t10].index("t10")


def test_cycles_and_self_parents_do_not_hang():
    cands = [Candidate(id="a", task="x", parent="b"), Candidate(id="b", task="x", parent="a"),
             Candidate(id="s", task="x", parent="s", status="promoted")]
    (tree,) = lineage(cands)
    assert sorted(r.id for r in tree.rows) == ["a", "b", "s"]
    assert next(r for r in tree.rows if r.id == "s").missing_parent == "s"
    render_tree([tree])


def test_a_very_deep_lineage_works():
    n = 5000  # an agent loop that refines one kernel for days
    cands = [Candidate(id=f"c{i}", task="deep", parent=f"c{i - 1}" if i else None) for i in range(n)]
    cands[-1] = cands[-1].model_copy(update={"status": "promoted"})
    (tree,) = lineage(cands)
    assert tree.rows[-1].depth == n - 1 and all(r.on_promoted_path for r in tree.rows)
    assert len(tree.model_dump_json()) > 0 and len(render_tree([tree]).splitlines()) == n + 2
