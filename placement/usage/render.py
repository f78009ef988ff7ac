"""The report as text: one list of blocks (headings, paragraphs, tables, images), written as Markdown or HTML.

`blocks` decides what the report says, from an Analysis; `markdown` and `to_html` only format
it, so both outputs always carry the same content.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import datetime, timezone

from placement.usage.analysis import Analysis


@dataclass
class Block:
    kind: str  # h1 | h2 | p | table | img | note
    text: str = ""
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def _f(x: float | None, digits: int = 1, suffix: str = "") -> str:
    return "–" if x is None else f"{x:.{digits}f}{suffix}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def when_utc(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _capped(rows: list[list[str]], limit: int, what: str) -> tuple[list[list[str]], str | None]:
    if limit and len(rows) > limit:
        return rows[:limit], f"{len(rows) - limit} more {what} not shown (--max-rows 0 shows all)."
    return rows, None


def blocks(a: Analysis, images: dict[str, str] | None = None, plot_note: str | None = None,
           what_if: list[Block] | None = None) -> list[Block]:
    o, t = a.options, a.total
    out = [Block("h1", "GPU utilisation report")]
    if a.window is None:
        return [*out, Block("p", "The metrics hold no SM utilisation samples.")]
    span_h = (a.window[1] - a.window[0]) / 3600.0
    out.append(Block("p", f"Window {when_utc(a.window[0])} → {when_utc(a.window[1])} ({span_h:.1f} h); "
                          f"{_n(len(a.gpus), 'GPU')} on {_n(len(a.nodes), 'node')}; {a.usage.rows:,} samples read in "
                          f"{_n(a.usage.chunks, 'chunk')}."))
    idle_h = sum(g.stats.idle_hours for g in a.idle)
    idle_share = t.idle_hours / t.hours if t.hours else None
    out.append(Block("p", f"Mean SM utilisation {_f(t.mean_sm)}% (p95 {_f(t.p95_sm, 0)}%); "
                          f"{_f(t.idle_hours, 0)} of {_f(t.hours, 0)} GPU-hours ({_pct(idle_share)}) "
                          f"under {o.idle_below:g}%. {_n(len(a.idle), 'card')} idle for ≥ {_pct(o.idle_share)} of "
                          f"the samples ({idle_h:.0f} idle GPU-hours); {_n(len(a.right_size), 'job')} peak under "
                          f"{_pct(o.memory_below)} of their GPU memory."))

    out.append(Block("h2", "Reclaim: cards idle most of the window"))
    if a.idle:
        free = [g for g in a.idle if g.free_in_request]
        out.append(Block("p", f"Under {o.idle_below:g}% SM for at least {_pct(o.idle_share)} of their samples. "
                              + (f"{len(free)} of them {'is' if len(free) == 1 else 'are'} free in the request: "
                                 "reclaim or downgrade (`--what-if` plans without them). " if free else "")
                              + "Cards a running job holds are idle allocations: ask their owners."))
        rows = [[g.node, g.info.name, g.model or g.info.model or "–", _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0),
                 _pct(g.stats.idle_share), _f(g.stats.idle_hours),
                 g.held_by or ("free" if g.in_request else "not in request"), ", ".join(g.jobs) or "–"]
                for g in a.idle]
        rows, more = _capped(rows, o.max_rows, "cards")
        out.append(Block("table", headers=["node", "GPU", "model", "mean SM %", "p95 SM %", "idle share", "idle h",
                                           "in the request", "jobs seen"], rows=rows))
        if more:
            out.append(Block("note", more))
    else:
        out.append(Block("p", "None."))

    out.append(Block("h2", "Right-sizing: jobs using little of their GPU memory"))
    if a.right_size:
        saved = sum(j.suggestion.gpus_saved for j in a.right_size if j.suggestion)
        out.append(Block("p", f"Peak GPU memory under {_pct(o.memory_below)} of what they declared or held; a MIG "
                              f"instance with the peak × {o.headroom:g} would free about {saved:.1f} GPUs."))
        rows = [[j.name, j.team or "–", str(j.gpus), _f(j.declared_gib), j.declared_from, _f(j.stats.mem_peak),
                 _pct(j.memory_share), _f(j.stats.mean_sm), (j.suggestion.profile or "–") if j.suggestion else "–",
                 _f(j.suggestion.gpus_saved, 2) if j.suggestion else "–", j.suggestion.note if j.suggestion else ""]
                for j in sorted(a.right_size, key=lambda j: -(j.suggestion.gpus_saved if j.suggestion else 0))]
        rows, more = _capped(rows, o.max_rows, "jobs")
        out.append(Block("table", headers=["job", "team", "GPUs", "declared GiB", "declared as", "peak GiB",
                                           "peak share", "mean SM %", "MIG instance", "GPUs saved", "note"], rows=rows))
        if more:
            out.append(Block("note", more))
    else:
        out.append(Block("p", "None."))

    if a.over_declared:
        out.append(Block("h2", "Over-declared: lower value in the next plan"))
        w = a.over_declared_weight
        out.append(Block("p", "Pending jobs whose tasks declare more gpu_memory_gib than they were seen to use. "
                              "After `placement usage annotate`, the term usage.over_declared takes "
                              f"{'weights.over_declared' if w is None else f'{w:g}'} × the unused share of their "
                              "priority value."))
        out.append(Block("table", headers=["job", "team", "declared GiB", "peak GiB", "unused", "value kept"],
                         rows=[[j.name, j.team or "–", _f(j.declared_gib), _f(j.stats.mem_peak), _pct(j.unused),
                                _pct(1 - (w or 0) * j.unused)] for j in a.over_declared]))

    if what_if:
        out.extend(what_if)

    out.append(Block("h2", "Teams"))
    out.append(Block("table", headers=["team", "GPUs", "GPU-hours", "mean SM %", "p95 SM %", "idle h", "mem mean GiB"],
                     rows=[[g.name, str(g.gpus), _f(g.stats.hours), _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0),
                            _f(g.stats.idle_hours), _f(g.stats.mem_mean)] for g in a.teams]))
    out.append(Block("h2", "Nodes"))
    node_rows = [[g.name, str(g.gpus), _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0), _f(g.stats.idle_hours),
                  _f(g.stats.mem_mean), _f(g.stats.mem_peak)]
                 for g in sorted(a.nodes, key=lambda g: (g.stats.mean_sm or 0.0, g.name))]
    node_rows, more = _capped(node_rows, o.max_rows, "nodes")
    out.append(Block("table", headers=["node", "GPUs", "mean SM %", "p95 SM %", "idle h", "mem mean GiB",
                                       "mem peak GiB"], rows=node_rows))
    if more:
        out.append(Block("note", more + " Sorted by mean utilisation, lowest first."))
    out.append(Block("h2", "Jobs"))
    job_rows = [[j.name, j.team or "–", j.state, str(j.gpus), _f(j.stats.mean_sm), _f(j.stats.p95_sm, 0),
                 _f(j.stats.idle_hours), _f(j.stats.mem_peak), _f(j.declared_gib)]
                for j in sorted(a.jobs, key=lambda j: (j.stats.mean_sm or 0.0, j.name))]
    job_rows, more = _capped(job_rows, o.max_rows, "jobs")
    out.append(Block("table", headers=["job", "team", "state", "GPUs", "mean SM %", "p95 SM %", "idle h",
                                       "peak GiB", "declared GiB"], rows=job_rows))
    if more:
        out.append(Block("note", more + " Sorted by mean utilisation, lowest first."))
    out.append(Block("h2", "GPUs"))
    gpu_rows = [[g.node, g.info.name, g.model or g.info.model or "–", _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0),
                 _f(g.stats.idle_hours), _f(g.stats.mem_mean), _f(g.stats.mem_peak), _f(g.stats.mem_total),
                 _f(g.stats.power_mean, 0), ", ".join(g.jobs) or "–"]
                for g in sorted(a.gpus, key=lambda g: (g.stats.mean_sm or 0.0, g.node, g.info.name))]
    gpu_rows, more = _capped(gpu_rows, o.max_rows, "GPUs")
    out.append(Block("table", headers=["node", "GPU", "model", "mean SM %", "p95 SM %", "idle h", "mem mean GiB",
                                       "mem peak GiB", "mem total GiB", "power W", "jobs"], rows=gpu_rows))
    if more:
        out.append(Block("note", more + " Sorted by mean utilisation, lowest first."))

    out.append(Block("h2", "Plots"))
    if images:
        out.extend(Block("img", text=alt, rows=[[path]]) for alt, path in images.items())
    out.append(Block("note", plot_note or "Plots were not requested (--plots DIR)."))
    return out


def markdown(parts: list[Block]) -> str:
    lines: list[str] = []
    for b in parts:
        if b.kind == "h1":
            lines += [f"# {b.text}", ""]
        elif b.kind == "h2":
            lines += [f"## {b.text}", ""]
        elif b.kind in ("p", "note"):
            lines += [b.text if b.kind == "p" else f"_{b.text}_", ""]
        elif b.kind == "img":
            lines += [f"![{b.text}]({b.rows[0][0]})", ""]
        elif b.kind == "table":
            lines.append("| " + " | ".join(b.headers) + " |")
            lines.append("|" + "|".join("---" for _ in b.headers) + "|")
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in b.rows]
            lines.append("")
    return "\n".join(lines)


def to_html(parts: list[Block]) -> str:
    body: list[str] = []
    for b in parts:
        e = html.escape(b.text)
        if b.kind in ("h1", "h2"):
            body.append(f"<{b.kind}>{e}</{b.kind}>")
        elif b.kind == "p":
            body.append(f"<p>{e}</p>")
        elif b.kind == "note":
            body.append(f"<p class='note'>{e}</p>")
        elif b.kind == "img":
            body.append(f"<figure><img src='{html.escape(b.rows[0][0])}' alt='{e}'><figcaption>{e}</figcaption>"
                        "</figure>")
        elif b.kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    style = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
             "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f0f0f0}"
             ".note{color:#666;font-style:italic}img{max-width:100%}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>GPU utilisation report</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
