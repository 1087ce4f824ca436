"""The lineage of candidates as a tree per task, with the promoted path marked.

A node is on the promoted path when it is promoted or one of its descendants is: following the
marks from a root leads to every kernel that was kept. A candidate whose parent is not in the
ledger becomes a root (``missing_parent`` says which id it named); a parent cycle is broken at the
first node reached again::

    >>> from kwiki.ledger import lineage, render_tree
    >>> print(render_tree(lineage(Ledger(ws).read().candidates)))    # doctest: +SKIP
    transpose
    └── * c01 [promoted] naive copy kernel
        ├── c02 [rejected] pad the smem tile to 33 columns
        ...
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from .store import Candidate

PATH_MARK = "*"


class TreeRow(BaseModel):
    """One candidate in display order (pre-order); ``depth`` 0 is a root. Flat, so any depth serializes."""

    key: str
    id: str
    task: str
    parent: str | None = None  # the parent's key when it is in the ledger
    depth: int = 0
    last: bool = True  # the last child of its parent (for drawing)
    mechanism: str = ""
    status: str = "candidate"
    reason: str = ""
    on_promoted_path: bool = False
    missing_parent: str | None = None
    children: list[str] = Field(default_factory=list)  # keys


class TaskTree(BaseModel):
    task: str
    rows: list[TreeRow] = Field(default_factory=list)
    promoted: list[str] = Field(default_factory=list)  # keys of promoted candidates, in ledger order
    size: int = 0

    @property
    def roots(self) -> list[TreeRow]:
        return [r for r in self.rows if r.depth == 0]

    def promoted_path(self, key: str) -> list[str]:
        """Keys from the root down to ``key``."""
        by_key = {r.key: r for r in self.rows}
        path: list[str] = []
        while key in by_key and key not in path:
            path.append(key)
            key = by_key[key].parent or ""
        return path[::-1]


def lineage(candidates: list[Candidate]) -> list[TaskTree]:
    """One :class:`TaskTree` per task (tasks and siblings in ledger order). Iterative: any depth works."""
    by_key = {c.key: c for c in candidates}
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for c in candidates:
        pk = c.parent_key
        if pk and pk in by_key and pk != c.key:
            children.setdefault(pk, []).append(c.key)
        else:
            roots.append(c.key)

    trees: dict[str, TaskTree] = {}
    rows: dict[str, TreeRow] = {}
    # roots first; members of a parent cycle are reachable from no root, so each starts from its first member
    starts = roots + [c.key for c in candidates]
    for start in starts:
        if start in rows:
            continue
        tree = trees.setdefault(by_key[start].task, TaskTree(task=by_key[start].task))
        order: list[str] = []
        stack: list[tuple[str, int, bool, str | None]] = [(start, 0, True, None)]
        while stack:
            key, depth, last, parent = stack.pop()
            if key in rows:  # closes a parent cycle
                continue
            c = by_key[key]
            pk = c.parent_key
            missing = c.parent if (depth == 0 and pk and (pk not in by_key or pk == key)) else None
            row = TreeRow(key=key, id=c.id, task=c.task, parent=parent, depth=depth, last=last, mechanism=c.mechanism,
                          status=c.status, reason=c.reason, missing_parent=missing)
            rows[key] = row
            order.append(key)
            tree.rows.append(row)
            kids = [k for k in children.get(key, []) if k not in rows]
            row.children = kids
            for i, kid in reversed(list(enumerate(kids))):
                stack.append((kid, depth + 1, i == len(kids) - 1, key))
        for key in reversed(order):  # post-order: a node is on the path if it or a descendant is promoted
            row = rows[key]
            row.on_promoted_path = row.status == "promoted" or any(rows[k].on_promoted_path for k in row.children)
    for tree in trees.values():
        tops = tree.roots
        for i, r in enumerate(tops):
            r.last = i == len(tops) - 1
    for c in candidates:
        tree = trees[c.task]
        tree.size += 1
        if c.status == "promoted":
            tree.promoted.append(c.key)
    return list(trees.values())


def render_tree(trees: list[TaskTree], width: int = 110) -> str:
    """Plain text: ``*`` marks the promoted path, the status is in brackets, rejections show their reason."""
    lines: list[str] = []
    for tree in trees:
        lines.append(f"{tree.task}  ({tree.size} candidates, {len(tree.promoted)} promoted)")
        open_levels: list[bool] = []  # per depth: does a sibling follow (draw a bar)?
        for row in tree.rows:
            del open_levels[row.depth:]
            prefix = "".join("│   " if more else "    " for more in open_levels)
            mark = f"{PATH_MARK} " if row.on_promoted_path else ""
            text = f"{mark}{row.id} [{row.status}] {row.mechanism}"
            if row.missing_parent:
                text += f"  (parent '{row.missing_parent}' not in the ledger)"
            if row.status == "rejected" and row.reason:
                text += f" -- {row.reason}"
            line = f"{prefix}{'└── ' if row.last else '├── '}{text}"
            lines.append(line if len(line) <= width else line[: width - 1] + "…")
            open_levels.append(not row.last)
    if trees:
        lines.append(f"({PATH_MARK} = on the path to a promoted candidate)")
    return "\n".join(lines)
