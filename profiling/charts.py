"""Charts of a diagnosis, drawn by matplotlib: inline SVG for the web page (no script, no network), PNG for
``kwiki diagnose --plot``.

    launch_chart(launch)        a launch's signal magnitudes beside its warp-stall shares
    timeline_chart(timeline)    the PM-sampling series, the tail shaded (the figure ``kwiki diagnose --plot`` writes)
    comparison_chart(kernel)    before / after of a matched kernel: signals and stall shares, duration in the title

Why matplotlib, a dependency and not an extra: the same library draws the ``--plot`` PNG file and these SVGs, so a
clean checkout has both (README, "Charts"). Figures are made with the object API (``matplotlib.figure.Figure``, no
pyplot state) under one lock, with text kept as SVG text (``svg.fonttype: none``: selectable, scaled by the page)
and math parsing off, so a kernel name with ``$`` or ``<`` is drawn as written; matplotlib escapes the SVG text.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from typing import IO, TYPE_CHECKING

from markupsafe import Markup

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType as RcKey

    from .compare import KernelComparison
    from .diagnose import LaunchDiagnosis
    from .timeline import Timeline

#: matplotlib settings of every chart: SVG text stays text, no mathtext, no timestamp, stable ids.
RC: dict[RcKey, object] = {"svg.fonttype": "none", "text.parse_math": False, "svg.hashsalt": "kwiki", "font.size": 8,
      "axes.spines.top": False, "axes.spines.right": False}
BEFORE, AFTER, BAR = "#9aa3b2", "#2355c8", "#2355c8"
MAX_BARS = 8  # signals or stall reasons per panel: the largest; the rest are in the text beside the chart
BAR_HEIGHT_IN = 0.26  # inches per bar row
LABEL_IN_PER_CHAR = 0.058  # inches a character of an 8 pt label takes (DejaVu Sans, the default font)
_LOCK = threading.Lock()  # matplotlib's rc settings and font cache are process-wide: one chart at a time


@contextmanager
def _drawing() -> Iterator[None]:
    import matplotlib

    with _LOCK, matplotlib.rc_context(RC):
        yield


def svg(fig: Figure) -> Markup:
    """``fig`` as an inline ``<svg>`` element (no XML prolog, no fixed size: the page's CSS sets the width)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # width/height in pt would pin the size; the viewBox keeps the aspect ratio when CSS scales it
    text = re.sub(r'^<svg([^>]*?) width="[^"]+" height="[^"]+"', r'<svg\1 class="chart" role="img"', text, count=1)
    return Markup(text)


def _hbars(ax: Axes, labels: list[str], series: list[tuple[str, list[float], str]], xlabel: str) -> None:
    """Horizontal bars, one group per label (top to bottom), one bar per series of the group, values written at
    the bar ends."""
    n = len(series)
    height = 0.8 / n
    for i, (name, values, color) in enumerate(series):
        ys = [row + (i - (n - 1) / 2) * height for row in range(len(labels))]
        bars = ax.barh(ys, values, height=height * 0.95, color=color, label=name or None)
        ax.bar_label(bars, labels=[f"{v:.0f}%" if v >= 1 else f"{v:.1f}%" for v in values], padding=2, fontsize=7)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    top = max((v for _, values, _ in series for v in values), default=0.0)
    ax.set_xlim(0, max(top * 1.18, 1.0))
    if n > 1:
        ax.legend(fontsize=7, frameon=False, loc="best")


def _panels(fig: Figure, labels: list[list[str]], rows: int, top_in: float = 0.3) -> list[Axes]:
    """Side-by-side bar panels placed by hand (a layout engine costs more than the drawing): each panel leaves
    room on its left for its longest label and on its right for the values written at the bar ends."""
    width, height = fig.get_size_inches()
    share = width / len(labels)
    out = []
    for i, names in enumerate(labels):
        left = i * share + min(LABEL_IN_PER_CHAR * max((len(n) for n in names), default=4) + 0.15, share / 2)
        right = (i + 1) * share - 0.4
        out.append(fig.add_axes((left / width, 0.45 / height, (right - left) / width, (height - 0.45 - top_in) / height)))
    return out


def _top(shares: dict[str, float], n: int = MAX_BARS) -> list[tuple[str, float]]:
    return sorted(((k, v) for k, v in shares.items() if v > 0), key=lambda kv: -kv[1])[:n]


def launch_chart(launch: LaunchDiagnosis) -> Markup | None:
    """A launch's signals by magnitude (share of runtime at stake) beside its warp-stall shares; None with neither."""
    signals = [(s.signal, s.magnitude * 100) for s in launch.signals[:MAX_BARS]]
    stalls = [(k, v * 100) for k, v in _top(launch.stall_shares)]
    panels = [(rows, title) for rows, title in ((signals, "signals: share of runtime at stake"), (stalls, "warp-stall shares"))
              if rows]
    if not panels:
        return None
    from matplotlib.figure import Figure

    with _drawing():
        rows = max(len(r) for r, _ in panels)
        fig = Figure(figsize=(4.4 * len(panels), BAR_HEIGHT_IN * rows + 0.9))
        for ax, (data, title) in zip(_panels(fig, [[k for k, _ in r] for r, _ in panels], rows), panels):
            _hbars(ax, [k for k, _ in data], [("", [v for _, v in data], BAR)], "%")
            ax.set_title(title, fontsize=8, loc="left")
        return svg(fig)


def timeline_figure(t: Timeline) -> Figure:
    """One panel per PM-sampling series over the run; the activity panel shades the tail (the last
    ``tail_share`` of the run under half the peak)."""
    from matplotlib.figure import Figure

    height = 0.95 * len(t.series) + 0.8
    fig = Figure(figsize=(9, height))
    fig.subplots_adjust(left=0.24, right=0.98, top=1 - 0.35 / height, bottom=0.5 / height, hspace=0.35)
    axes = fig.subplots(len(t.series), 1, sharex=True, squeeze=False)[:, 0]
    for ax, s in zip(axes, t.series):
        xs = [i * s.step_us for i in range(len(s.values))]
        ax.plot(xs, s.values, lw=1, color=AFTER)
        ax.fill_between(xs, s.values, color=AFTER, alpha=0.12, lw=0)
        if s.metric == t.activity and t.tail_share > 0 and xs:
            ax.axvspan(xs[-1] * (1 - t.tail_share), xs[-1], color="#d9534f", alpha=0.15, lw=0, label=f"tail {t.tail_share:.0%}")
            ax.legend(fontsize=6, frameon=False, loc="upper right")
        ax.set_ylabel(s.metric.split(".TriageCompute.")[-1].replace("pmsampling:", "")[:34], fontsize=6, rotation=0, ha="right")
        ax.tick_params(labelsize=6)
    axes[-1].set_xlabel("us since the series' first active sample", fontsize=7)
    fig.suptitle(f"{t.kernel[:90]} (launch {t.launch_id}): tail {t.tail_share:.0%}, idle {t.idle_share:.0%}", fontsize=8)
    return fig


def timeline_chart(t: Timeline) -> Markup | None:
    """The PM-sampling timeline as inline SVG; None when it has no series to draw."""
    if not t.series:
        return None
    with _drawing():
        return svg(timeline_figure(t))


def write_timeline_png(t: Timeline, path: str | PathLike[str] | IO[bytes]) -> None:
    """The timeline figure as a PNG file or binary stream (``kwiki diagnose --plot FILE``)."""
    with _drawing():
        timeline_figure(t).savefig(path, dpi=110, format="png")


def comparison_chart(k: KernelComparison) -> Markup:
    """Before and after of one matched kernel: signal magnitudes (resolved, persisting, appeared) and stall shares
    side by side, the durations and the verdict in the title."""
    from matplotlib.figure import Figure

    changes = sorted(k.resolved + k.persisting + k.appeared, key=lambda c: -max(c.before or 0, c.after or 0))[:MAX_BARS]
    stalls = sorted((d for d in k.deltas if d.metric.startswith("stall share ")),
                    key=lambda d: -max(d.before or 0, d.after or 0))[:MAX_BARS]
    with _drawing():
        panels = [p for p in ((changes, "signals: share of runtime at stake"), (stalls, "warp-stall shares")) if p[0]]
        rows = max([len(p[0]) for p in panels], default=1)
        fig = Figure(figsize=(4.4 * max(len(panels), 1), 2 * BAR_HEIGHT_IN * rows + 1.1))
        names = [[getattr(c, "signal", None) or getattr(c, "metric", "").removeprefix("stall share ") for c in items]
                 for items, _ in panels]
        axes = _panels(fig, names or [[]], rows, top_in=0.5)
        for ax, labels, (items, title) in zip(axes, names, panels):
            _hbars(ax, labels, [("before", [(c.before or 0) * 100 for c in items], BEFORE),
                                ("after", [(c.after or 0) * 100 for c in items], AFTER)], "%")
            ax.set_title(title, fontsize=8, loc="left")
        if not panels:
            axes[0].set_axis_off()
        fig.suptitle(f"{k.after_kernel[:70]}: {k.before_ns / 1000:.1f} us -> {k.after_ns / 1000:.1f} us "
                     f"({k.speedup:.2f}x, {k.verdict})", fontsize=8)
        return svg(fig)
