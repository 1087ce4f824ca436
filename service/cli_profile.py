"""Terminal output of ``kwiki diagnose``: one diagnosis, or a comparison with ``--baseline``.

Kept out of cli.py so the command stays a thin wrapper around ``diagnose_request``.
"""

from __future__ import annotations

import typer

from kwiki.profiling.compare import Comparison
from kwiki.profiling.diagnose import DiagnoseResponse, LaunchDiagnosis
from kwiki.profiling.hotspots import HotspotReport

MAX_LAUNCHES_PRINTED = 12  # a model export has hundreds of launches: print the top kernels' longest launches
TOP_KERNELS_PRINTED = 10


def _launch(launch: LaunchDiagnosis) -> None:
    typer.secho(f"{launch.kernel} (launch {launch.launch_id})", bold=True)
    v = launch.verdict
    if v is not None:
        color = {"speed-of-light": "green", "invalid": "red", "partial": "yellow"}.get(v.status, "white")
        typer.secho(f"  verdict: {v.status}: {v.summary}", fg=color)
        for helps in v.still_helps[1:]:
            typer.echo(f"      also: {helps}")
        for c in v.checks:
            typer.secho(f"  check [{c.level}] {c.check}: {c.message}", fg="red" if c.level == "error" else "yellow")
    if not launch.signals:
        typer.echo("  no signal fired")
    for sig in launch.signals[:5]:
        tag = " (by design)" if sig.by_design else ""
        typer.secho(f"  {sig.signal:24s} magnitude {sig.magnitude:.2f}  {sig.title}{tag}", fg="cyan")
        for ev in sig.evidence[:3]:
            typer.echo(f"      {ev.metric} = {ev.value} (threshold {ev.threshold})")
        for page in sig.pages[:3]:
            typer.echo(f"      -> {page.id} [{page.type}, {page.confidence or '-'}] {page.title}")
    if launch.missing:
        typer.echo("  not evaluated (metrics missing): " + ", ".join(m.signal for m in launch.missing[:8]))
    if launch.timeline is not None:
        t = launch.timeline
        typer.echo(f"  timeline ({t.samples} samples x {t.interval_us:g} us, {t.activity.split('.TriageCompute.')[-1]}):")
        typer.echo(f"    {t.sparkline}")
        for line in t.evidence + t.warnings:
            typer.echo(f"    {line}")
    if launch.next_step is not None:
        s = launch.next_step
        typer.echo(f"  next: {s.command}")
        typer.echo(f"        {s.export}" + (f"   (build with {s.build})" if s.build else ""))
        typer.echo(f"        {s.why}")


def print_diagnosis(resp: DiagnoseResponse) -> None:
    """Kernels by GPU-time share (when there are several), then each launch (the top kernels' longest ones)."""
    launches = resp.launches
    if len(resp.kernels) > 1:
        typer.secho(f"{len(resp.kernels)} kernels, {len(resp.launches)} launches, by share of GPU time:", bold=True)
        for ks in resp.kernels[:TOP_KERNELS_PRINTED]:
            typer.echo(f"  {ks.share:6.1%}  {ks.total_ns / 1e3:9.1f} us  x{ks.launches:<3d} {ks.top or '-':22s} {ks.kernel[:90]}")
        if resp.program is not None and resp.program.summary:
            typer.secho(f"  {resp.program.summary}", bold=True)
        if len(resp.launches) > MAX_LAUNCHES_PRINTED:
            by_kernel: dict[str, list[LaunchDiagnosis]] = {}
            for d in resp.launches:
                by_kernel.setdefault(d.kernel or d.name, []).append(d)
            launches = [by_kernel[ks.kernel][ks.longest] for ks in resp.kernels[:MAX_LAUNCHES_PRINTED] if ks.kernel in by_kernel]
    for launch in launches:
        _launch(launch)
    if resp.hotspots is not None:
        print_hotspots(resp.hotspots)
    for w in resp.warnings:
        typer.secho(f"warning: {w}", fg="yellow", err=True)


def print_hotspots(h: HotspotReport) -> None:
    typer.secho(f"source hotspots ({h.view}, {h.total_samples:,} warp-stall samples):", bold=True)
    for i, spot in enumerate(h.hotspots):
        where = f"{spot.file.rsplit('/', 1)[-1]}:{spot.line}" if spot.line is not None else f"{spot.address}"
        mark = "  <- " + ", ".join(spot.signals[:3]) if spot.signals else ""
        typer.secho(f"  {spot.share:6.1%} {where:28s} {spot.code[:70]}{mark}", fg="cyan" if i == h.culprit else None)
        stalls = ", ".join(f"{r} {v:.0%}" for r, v in spot.stalls.items())
        if stalls:
            typer.echo(f"         stalls: {stalls}")
        for fact in spot.facts:
            typer.echo(f"         {fact}")
        if spot.note:
            typer.echo(f"         ({spot.note})")
    for w in h.warnings:
        typer.secho(f"  warning: {w}", fg="yellow")


def print_comparison(c: Comparison) -> None:
    color = {"improved": "green", "regressed": "red"}.get(c.verdict, "yellow")
    speed = f"{c.speedup:.2f}x" if c.speedup else "-"
    typer.secho(f"{c.after} against {c.before}: {c.verdict} ({speed})", bold=True, fg=color)
    for k in c.kernels:
        name = k.after_kernel if k.after_kernel == k.before_kernel else f"{k.before_kernel} -> {k.after_kernel}"
        typer.secho(f"  {name[:100]}  [{k.matched_by}]", bold=True)
        typer.echo(f"    duration {k.before_ns / 1e3:.1f} us -> {k.after_ns / 1e3:.1f} us: {k.speedup:.2f}x, {k.verdict} "
                   f"(noise band {k.noise:.1%}; {k.before_launches} / {k.after_launches} launches)")
        for label, items in (("resolved", k.resolved), ("appeared", k.appeared)):
            if items:
                typer.echo(f"    {label}: " + ", ".join(f"{s.signal} ({(s.before if label == 'resolved' else s.after) or 0:.2f})" for s in items))
        if k.persisting:
            typer.echo("    persisting: " + ", ".join(f"{s.signal} ({s.before:.2f} -> {s.after:.2f})" for s in k.persisting))
        for d in k.deltas:
            if d.before is None or d.after is None or d.before == d.after:
                continue
            ratio = f"  x{d.ratio:.2f}" if d.ratio is not None else ""
            typer.echo(f"      {d.metric:34s} {d.before:>14,.2f} -> {d.after:>14,.2f}{ratio}")
        for w in k.warnings:
            typer.secho(f"    warning: {w}", fg="yellow")
    for name in c.unmatched_before:
        typer.echo(f"  only before: {name[:100]}")
    for name in c.unmatched_after:
        typer.echo(f"  only after: {name[:100]}")
    typer.echo(f"rule: {c.rule}")
