"""The utilisation report: per GPU, node, team and job, with reclaim and right-sizing suggestions.

`analyse` (placement.usage.analysis) turns streamed statistics and, when given, the request into
rows; the renderers (placement.usage.render) write the same content as Markdown or HTML; `plots`
(placement.usage.plots) draws PNGs when matplotlib is installed (the optional `report` extra) and
says so plainly when it is not. This module gathers them under one name.
"""

from __future__ import annotations

from placement.usage.analysis import (
    Analysis,
    GpuRow,
    GroupRow,
    JobRow,
    Options,
    Suggestion,
    analyse,
    job_name,
)
from placement.usage.plots import MISSING_MATPLOTLIB, plots
from placement.usage.render import Block, blocks, markdown, to_html

__all__ = ["MISSING_MATPLOTLIB", "Analysis", "Block", "GpuRow", "GroupRow", "JobRow", "Options", "Suggestion",
           "analyse", "blocks", "job_name", "markdown", "plots", "to_html"]
