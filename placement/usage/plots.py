"""The report's PNG plots (heat maps over time, per-team histograms), when matplotlib is installed.

matplotlib is optional (the `report` extra): without it `plots` draws nothing and says so, and
every figure is still in the report's tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from placement.usage.analysis import Analysis
from placement.usage.render import when_utc

MISSING_MATPLOTLIB = ("Plots skipped: matplotlib is not installed "
                      "(pip install 'gpu-placement-planner[report]' adds it); every figure above is in the tables.")


def plots(a: Analysis, folder: Path, per_node: int = 8) -> tuple[dict[str, str], str]:
    """PNG files in `folder`: the node × time heat map, GPU × time heat maps of the `per_node` nodes with the
    most idle GPU-hours, and SM-utilisation histograms per team. Returns ({caption: path}, note)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}, MISSING_MATPLOTLIB
    if a.window is None or a.usage.t0 is None:
        return {}, "No plots: the metrics hold no SM utilisation samples."
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    nodes = [g.name for g in a.nodes]
    devices_of = {n: np.array([g.device for g in a.gpus if g.node == n], dtype=np.int64) for n in nodes}
    grid = np.array([a.usage.timeline(devices_of[n]) for n in nodes])
    out["SM utilisation per node over time"] = _heat(plt, grid, nodes, a, folder / "heatmap_nodes.png",
                                                     "mean SM utilisation per node")
    busiest_idle = sorted(a.nodes, key=lambda g: -g.stats.idle_hours)[:per_node]
    for g in busiest_idle:
        rows = [r for r in a.gpus if r.node == g.name]
        grid = np.array([a.usage.timeline(np.array([r.device])) for r in rows])
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", g.name)
        out[f"SM utilisation of {g.name}'s GPUs"] = _heat(plt, grid, [r.info.name for r in rows], a,
                                                          folder / f"heatmap_{safe}.png", f"{g.name}: SM utilisation")
    out["SM utilisation histogram per team"] = _team_histograms(plt, a, folder / "teams_histogram.png")
    return {caption: str(path) for caption, path in out.items()}, f"{len(out)} plots in {folder}."


def _heat(plt, grid: np.ndarray, labels: list[str], a: Analysis, path: Path, title: str) -> Path:  # noqa: ANN001
    usage = a.usage
    assert usage.t0 is not None
    fig, ax = plt.subplots(figsize=(12, max(2.0, 0.22 * len(labels) + 1.2)))
    hours = usage.bucket_s / 3600.0
    extent = (0, grid.shape[1] * hours, len(labels) - 0.5, -0.5)
    im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", vmin=0, vmax=100, cmap="viridis",
                   interpolation="nearest", extent=extent)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7 if len(labels) > 30 else 9)
    ax.set_xlabel(f"hours since {when_utc(usage.t0)} (bucket {hours:g} h)")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="SM %")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _team_histograms(plt, a: Analysis, path: Path) -> Path:  # noqa: ANN001
    teams = a.teams or []
    cols = min(3, max(1, len(teams)))
    rows = max(1, -(-len(teams) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
    edges = np.arange(0, 101, 10)
    for ax, team in zip(axes.flat, teams, strict=False):
        hist = team.stats.hist
        tens = np.add.reduceat(hist[:100], edges[:-1])
        tens[-1] += hist[100]
        share = tens / max(1, hist.sum())
        ax.bar(edges[:-1] + 5, 100 * share, width=9, color="#4c72b0")
        ax.set_title(f"{team.name} ({team.gpus} GPUs)", fontsize=10)
        ax.set_xlim(0, 100)
        ax.set_xlabel("SM %")
        ax.set_ylabel("% of samples")
    for ax in list(axes.flat)[len(teams):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
