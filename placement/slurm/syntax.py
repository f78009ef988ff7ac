"""Slurm's small languages, parsed: host lists, GRES strings, GPU index lists, durations, Comments.

Kept apart from the reader so each parser can be tested on the strings Slurm actually prints
(tests/test_slurm_read.py), and so the reader reads as what it maps, not how it splits text.
"""

from __future__ import annotations

import re

#: What the placer writes into a job's Comment starts with this; the user's own text before it is kept.
MARK = "placement:"


def expand_hostlist(text: str) -> list[str]:
    """`n[1-3,5],gpu-[01-02]` -> n1 n2 n3 n5 gpu-01 gpu-02 (zero padding kept), in Slurm's order."""
    out: list[str] = []
    for part in _split_top(text):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", part)
        if not m:
            if part:
                out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for rng in ranges.split(","):
            lo, _, hi = rng.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                for tail in expand_hostlist(suffix) if suffix else [""]:
                    out.append(f"{prefix}{i:0{width}d}{tail}")
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_indices(text: str) -> list[int]:
    """`0-2,5` -> [0, 1, 2, 5]; `N/A` or empty -> []."""
    out: list[int] = []
    for rng in text.split(","):
        rng = rng.strip()
        if not rng or not rng[0].isdigit():
            continue
        lo, _, hi = rng.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def gres_items(text: str, name: str = "gpu") -> list[tuple[str | None, int, list[int] | None]]:
    """The `name` GRES entries of a GRES string as (type or None, count, indices or None).

    Reads node GRES (`gpu:g0:1,gpu:g1:1`, `gpu:a100:8(S:0-1)`), job requests (`gres:gpu:2`, `gres/gpu:2`,
    `gpu:g3:1`) and allocations with indices (`gpu:g1:1(IDX:1)`, `gpu:2(IDX:0-1)`).
    """
    out: list[tuple[str | None, int, list[int] | None]] = []
    for raw in _split_top(text.replace("(", "[").replace(")", "]")):
        item, idx = raw, None
        m = re.search(r"\[([^\]]*)\]", raw)
        if m:
            item = raw[: m.start()]
            inside = m.group(1)
            if inside.startswith("IDX:"):
                idx = parse_indices(inside[4:])
        fields = item.replace("gres/", "gres:").split(":")
        if fields and fields[0] == "gres":
            fields = fields[1:]
        if not fields or fields[0] != name:
            continue
        fields = fields[1:]
        count = 1
        if fields and fields[-1].isdigit():
            count = int(fields.pop())
        kind = fields[0] if fields else None
        out.append((kind, count, idx))
    return out


def index_of_type(kind: str | None) -> int | None:
    """The GPU index a one-index GRES type names (`g3` -> 3); None for a model type such as `a100`."""
    if kind is None:
        return None
    m = re.fullmatch(r"g(\d+)", kind)
    return int(m.group(1)) if m else None


_UNITS = {"s": 1 / 3600, "m": 1 / 60, "min": 1 / 60, "h": 1.0, "d": 24.0}


def parse_hours(text: str) -> float | None:
    """`2h`, `90m`, `1.5d`, `3600s`, a bare number of hours; None when it is not one."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)?\s*", text)
    if not m:
        return None
    value = float(m.group(1)) * _UNITS[m.group(2) or "h"]
    return value if value > 0 else None


def user_comment(comment: str | None) -> str:
    """The user's part of a Comment: everything before what the placer wrote."""
    text = comment or ""
    at = text.find(MARK)
    return text[:at].rstrip(" ;|") if at >= 0 else text.strip()


def comment_words(comment: str | None) -> dict[str, str]:
    """`runtime=2h preemptible` in the user's part -> {"runtime": "2h", "preemptible": ""}."""
    words: dict[str, str] = {}
    for token in re.split(r"[\s,;]+", user_comment(comment)):
        if token:
            key, _, value = token.partition("=")
            words[key.lower()] = value
    return words


def with_note(comment: str | None, note: str) -> str:
    """The Comment with the placer's part replaced by `note` (removed when `note` is empty)."""
    mine = user_comment(comment)
    if not note:
        return mine
    return f"{mine}; {MARK} {note}" if mine else f"{MARK} {note}"


#: The note the placer writes before it clears a job's GPU request to set the chosen indices: if it is killed
#: between the two, the next cycle reads the job's GPUs per node from here instead of from the cleared request.
STARTING = "starting, gpus per node"


def noted_gpus(comment: str | None) -> int | None:
    """GPUs per node from a STARTING note in the placer's part of a Comment; None when there is none."""
    text = comment or ""
    at = text.find(MARK)
    m = re.search(STARTING + r" (\d+)", text[at:]) if at >= 0 else None
    return int(m.group(1)) if m else None
