"""Write an eval run: a markdown report, a JSON file of every figure, and a PNG chart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .runner import MEASURES, SHIPPED

README_START = "<!-- latest-results:start -->"
README_END = "<!-- latest-results:end -->"


def git_revision(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def table(results: dict[str, Any], group: str) -> str:
    """One markdown table: methods x measures for ``group`` ('all', 'test', 'category:symptom', ...)."""
    head = "| method | " + " | ".join(MEASURES) + " | n |\n|---|" + "---:|" * (len(MEASURES) + 1) + "\n"
    rows = []
    for method, groups in results["overall"].items():
        g = groups.get(group)
        if g:
            name = f"**{method}**" if method == SHIPPED else method
            rows.append(f"| {name} | " + " | ".join(f"{g[m]:.3f}" for m in MEASURES) + f" | {g['n']} |")
    return head + "\n".join(rows) + "\n"


def margin_table(margins: dict[str, dict[str, float]], group: str = "test") -> str:
    """The shipped method's paired nDCG@10 margin over each baseline, with its 95% bootstrap interval."""
    rows = [f"| {SHIPPED} - {base} | {m['mean']:+.3f} | {m['low']:+.3f} .. {m['high']:+.3f} | {m['n']} |"
            for base, m in margins.items()]
    return (f"| nDCG@10 margin ({group}) | mean | 95% interval (paired bootstrap) | n |\n|---|---:|---:|---:|\n"
            + "\n".join(rows) + "\n")


def category_table(results: dict[str, Any], measure: str = "nDCG@10") -> str:
    methods = list(results["overall"])
    cats = sorted({g for m in methods for g in results["overall"][m] if g.startswith("category:")})
    head = f"| category ({measure}) | " + " | ".join(methods) + " |\n|---|" + "---:|" * len(methods) + "\n"
    rows = [f"| {c.split(':', 1)[1]} | " + " | ".join(f"{results['overall'][m][c][measure]:.3f}" for m in methods) + " |"
            for c in cats]
    return head + "\n".join(rows) + "\n"


def markdown(suites: dict[str, dict[str, Any]], stamp: dict[str, Any]) -> str:
    out = [f"# kwiki retrieval eval\n\nrevision `{stamp['revision']}`, {stamp['created_at']}\n"]
    for suite, res in suites.items():
        man = res.get("manifest", {})
        out.append(f"\n## Suite `{suite}`\n\nindex corpus hash `{man.get('corpus_hash', '?')[:12]}`, model "
                   f"`{man.get('model', '?')}`, {man.get('counts', {}).get('pages', '?')} pages; "
                   f"top-3 rate on symptom+NCU questions (shipped, test split): {res.get('top3_symptom_ncu_test', 'n/a')}\n")
        for group, title in (("fresh", "Fresh blind questions (never tuned on: the honest figure)"),
                             ("real", "Real users' questions from public threads (never tuned on)"),
                             ("test", "Test split (reporting only)"), ("dev", "Dev split"), ("all", "All questions")):
            if not any(group in groups for groups in res["overall"].values()):
                continue
            out.append(f"\n### {title}\n\n" + table(res, group))
            if res.get("margins", {}).get(group):
                out.append("\n" + margin_table(res["margins"][group], group))
        if "dev" in res["overall"].get(SHIPPED, {}) and "fresh" in res["overall"].get(SHIPPED, {}):
            o = res["overall"][SHIPPED]
            out.append(f"\nDev-to-fresh gap of the shipped method: {o['dev']['nDCG@10'] - o['fresh']['nDCG@10']:+.3f}\n")
        fl = res.get("floor")
        if fl and fl.get("unanswerable") is not None:
            shares = ", ".join(f"{split} {v:.1%}" for split, v in fl["answerable"].items())
            out.append(f"\nRelevance floor (shipped): said \"no match\" for {fl['unanswerable']:.0%} of the "
                       f"{fl['n_unanswerable']} queries no page answers; for answerable questions (wrongly): {shares}\n")
        out.append("\n### Per category (all questions)\n\n" + category_table(res))
        fails = res.get("failures", [])
        if fails:
            out.append("\n### Shipped method: test-split misses (no relevant page in the top 3)\n\n")
            out += [f"- `{f['id']}` ({f['category']}): \"{f['query']}\" -> got {', '.join(f['got'][:3])}; "
                    f"wanted {', '.join(f['wanted'])}\n" for f in fails[:25]]
    return "".join(out)


def chart(suites: dict[str, dict[str, Any]], path: Path, measure: str = "nDCG@10") -> bool:
    """A grouped bar chart per suite (category x method). Returns False when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(suites), 1, figsize=(14, 4.5 * len(suites)), squeeze=False)
    colors = [plt.get_cmap("tab20")(i) for i in range(20)]  # 15+ methods: tab10 would repeat its colours
    for ax, (suite, res) in zip(axes[:, 0], suites.items()):
        methods = list(res["overall"])
        groups = ["all"] + sorted(g for g in res["overall"][methods[0]] if g.startswith("category:"))
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            vals = [res["overall"][m][g][measure] for g in groups]
            ax.bar([x + i * width for x in range(len(groups))], vals, width, label=m, color=colors[i % len(colors)])
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))])
        ax.set_xticklabels([g.replace("category:", "") for g in groups], rotation=20)
        ax.set_ylim(0, 1)
        ax.set_title(f"{suite}: {measure} by category and method")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over them
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_run(out_dir: Path, suites: dict[str, dict[str, Any]], stamp: dict[str, Any]) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    slim = {s: {k: v for k, v in r.items() if k not in ("runs", "per_question")} for s, r in suites.items()}
    (out_dir / "results.json").write_text(json.dumps({"stamp": stamp, "suites": suites}, indent=1, default=str))
    md = markdown(slim, stamp)
    (out_dir / "report.md").write_text(md)
    paths = {"report": out_dir / "report.md", "json": out_dir / "results.json"}
    if chart(slim, out_dir / "chart.png"):
        paths["chart"] = out_dir / "chart.png"
    return paths


def update_readme(readme: Path, report_md: str) -> None:
    text = readme.read_text() if readme.exists() else f"# Evals\n\n{README_START}\n{README_END}\n"
    if README_START not in text:
        text += f"\n{README_START}\n{README_END}\n"
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    body = report_md.split("\n", 1)[1] if report_md.startswith("# ") else report_md
    readme.write_text(f"{head}{README_START}\n{body.strip()}\n{README_END}{tail}")
