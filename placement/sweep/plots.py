"""The sweep's pictures: cost against the second measure with the Pareto front, utilisation against spot share.

Why this exists: a table of hundreds of points is read for one answer ("which points are worth it?"),
and a scatter with the front drawn through it gives that answer at a glance. matplotlib is an optional
extra (``gpu-placement-planner[report]``); without it the caller says the plots were skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from placement.sweep.run import SweepResult

_LABELS = {"wait_mean_h": "mean wait (h)", "gpus_unplaced": "unplaced GPU demand (GPUs)",
           "cluster_cost_per_hour": "cluster cost per hour", "utilisation_pct": "GPU utilisation (%)",
           "spot_share_pct": "spot share of GPUs (%)"}


def _xy(points: list[dict[str, Any]], x: str, y: str) -> tuple[list[float], list[float], list[dict[str, Any]]]:
    keep = [p for p in points if p["ok"] and isinstance(p.get(x), (int, float)) and isinstance(p.get(y), (int, float))
            and p.get(x) == p.get(x) and p.get(y) == p.get(y)]
    return [float(p[x]) for p in keep], [float(p[y]) for p in keep], keep


def write_plots(result: SweepResult, folder: Path) -> list[Path]:
    """PNGs into ``folder``: ``cost-vs-<measure>.png`` (front joined and labelled) and ``utilisation-vs-spot.png``.

    Raises ImportError when matplotlib is not installed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    y_key = result.second_measure
    xs, ys, pts = _xy(result.points, "cluster_cost_per_hour", y_key)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(xs, ys, s=18, color="#9aa5b1", label="points")
    front = sorted((x, y, p) for x, y, p in zip(xs, ys, pts, strict=True) if p.get("pareto"))
    if front:
        ax.plot([f[0] for f in front], [f[1] for f in front], "-o", color="#d1495b", ms=5, label="Pareto front")
        for x, y, p in front[:30]:  # the table's row numbers: axis values would not fit beside a dot
            ax.annotate(f"#{p['index']}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel(_LABELS["cluster_cost_per_hour"])
    ax.set_ylabel(_LABELS[y_key])
    ax.set_title(f"sweep: {len(result.points)} points (#: table row), cost against {_LABELS[y_key]}")
    ax.grid(alpha=0.3)
    ax.legend()
    path = folder / f"cost-vs-{'wait' if y_key == 'wait_mean_h' else 'unplaced'}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    out.append(path)

    xs, ys, pts = _xy(result.points, "spot_share_pct", "utilisation_pct")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = [p["cluster_cost_per_hour"] for p in pts]
    sc = ax.scatter(xs, ys, c=colours, cmap="viridis", s=24)
    if pts:
        fig.colorbar(sc, ax=ax, label=_LABELS["cluster_cost_per_hour"])
    ax.set_xlabel(_LABELS["spot_share_pct"])
    ax.set_ylabel(_LABELS["utilisation_pct"])
    ax.set_title("utilisation against spot share")
    ax.grid(alpha=0.3)
    path = folder / "utilisation-vs-spot.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    out.append(path)
    return out
