"""Reading requests and plans from files (JSON or YAML) for the faces.

One parser serves the CLI and the HTTP service, so a document that one face accepts the other
accepts too, and hostile input fails the same way in both: every problem with the bytes
themselves — not UTF-8/16/32, over the size limit, nested too deeply, YAML aliases, a bad gzip
stream, a syntax error — is a single :class:`DocumentError` with a message a person can act on,
never a traceback, a hang or gigabytes of memory.
"""

from __future__ import annotations

import codecs
import json
import math
import sys
import zlib
from pathlib import Path
from typing import Any

import yaml

#: Deepest nesting of mappings and lists accepted. Requests, plans and scenarios nest about ten
#: levels; Kubernetes objects a few more. The bound keeps recursive parsers, validators and
#: encoders far from Python's recursion limit (1,000), which a few kilobytes of ``[[[[`` reach.
MAX_DEPTH = 64

#: Byte-order marks and their codecs; the 4-byte UTF-32 marks first (UTF-32-LE starts like UTF-16-LE).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)

_YAML_SUFFIXES = (".yaml", ".yml")

# libyaml's C parser is 10-30x faster than the pure-Python one (a 2 MB body: seconds, not a minute).
_YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DocumentError(json.JSONDecodeError, yaml.YAMLError):
    """A document that cannot be read: the one exception :func:`parse_document` raises.

    A ``ValueError``; also a ``json.JSONDecodeError`` and a ``yaml.YAMLError`` so callers that
    catch either (the faces did before this type existed) keep catching every parse failure.
    ``str(exc)`` is the whole message; ``lineno``/``colno`` are 1-based when known, else 0.
    """

    def __init__(self, msg: str, lineno: int = 0, colno: int = 0) -> None:
        ValueError.__init__(self, msg)
        self.msg = msg
        self.doc = ""
        self.pos = 0
        self.lineno = lineno
        self.colno = colno

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across process pools
        return (type(self), (self.msg, self.lineno, self.colno))


def parse_document(raw: bytes, suffix: str | None = None, *, max_bytes: int | None = None,
                   max_depth: int = MAX_DEPTH) -> Any:
    """The data in `raw` (JSON or YAML), or :class:`DocumentError` saying what is wrong with it.

    `suffix` picks the syntax: ``.json``; ``.yaml``/``.yml``; either followed by ``.gz`` (or
    ``.gz`` alone) for a gzip stream; ``None`` or anything else means JSON, retried as YAML when
    it is not JSON. Text is UTF-8 (an optional BOM is skipped); UTF-16 and UTF-32 are decoded when
    they start with their byte-order mark. `max_bytes` bounds the input and, for gzip, the
    decompressed size too; `max_depth` bounds the nesting of mappings and lists. YAML anchors and
    aliases are refused: requests never need them, and a few hundred bytes of nested aliases
    expand into a structure that costs minutes and gigabytes to validate.
    """
    suffix = (suffix or "").lower()
    if max_bytes is not None and len(raw) > max_bytes:
        raise DocumentError(f"document is {len(raw)} bytes; the limit is {max_bytes}")
    if suffix.endswith(".gz"):
        raw = _gunzip(raw, max_bytes)
        suffix = suffix[: -len(".gz")]
    text = _decode(raw)
    if not text.strip():  # one message for an empty file, whatever its suffix says it should hold
        raise DocumentError(EMPTY)
    if suffix in _YAML_SUFFIXES:
        return _yaml(text, max_depth)
    try:
        data = json.loads(text)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:  # JSONDecodeError, and integers over Python's 4,300-digit limit
        if suffix == ".json" or not isinstance(exc, json.JSONDecodeError):
            raise DocumentError(f"invalid JSON: {_json_message(exc)}", *_json_position(exc)) from None
        if text.lstrip()[:1] in ("{", "["):  # meant as JSON: its error says more than YAML's would
            try:
                return _yaml(text, max_depth)
            except DocumentError:
                raise DocumentError(f"invalid JSON: {_json_message(exc)}", *_json_position(exc)) from None
        return _yaml(text, max_depth)
    _check_depth(data, max_depth)
    return data


def load_document(path: str | Path, *, max_bytes: int | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """Parse a JSON or YAML file; YAML by suffix, else JSON with a YAML retry for extension-less files.

    A ``.gz`` file (``NAME.json.gz``, ``NAME.yaml.gz``) is decompressed first and parsed by the
    suffix before ``.gz``. Errors in the content are :class:`DocumentError` (naming the file);
    a missing or unreadable file stays an ``OSError``.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".gz":
        suffix = Path(p.stem).suffix.lower() + ".gz"
    if max_bytes is not None:
        size = p.stat().st_size
        if size > max_bytes:
            raise DocumentError(f"{p}: file is {size} bytes; the limit is {max_bytes}")
    try:
        return parse_document(p.read_bytes(), suffix, max_bytes=max_bytes, max_depth=max_depth)
    except DocumentError as exc:
        raise DocumentError(f"{p}: {exc.msg}", exc.lineno, exc.colno) from None


def emit(text: str, output: str | Path | None) -> None:
    """A face's document to the file named by -o, else to stdout (one trailing newline either way)."""
    text = text if text.endswith("\n") else text + "\n"
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)


# ------------------------------------------------------------------------------------------------


def _gunzip(raw: bytes, max_bytes: int | None) -> bytes:
    """Decompress every gzip member, stopping as soon as the output passes `max_bytes` (a gzip bomb
    of a few kilobytes otherwise inflates to gigabytes before any check could run)."""
    if raw[:2] != b"\x1f\x8b":
        raise DocumentError("not a gzip file (it does not start with the gzip magic bytes)")
    out: list[bytes] = []
    size = 0
    rest = raw
    try:
        while rest:
            d = zlib.decompressobj(wbits=31)
            chunk = d.decompress(rest, 0 if max_bytes is None else max_bytes - size + 1)  # 0: no bound
            size += len(chunk)
            out.append(chunk)
            if max_bytes is not None and (size > max_bytes or d.unconsumed_tail):
                raise DocumentError(f"decompressed document exceeds the limit of {max_bytes} bytes")
            if not d.eof:
                raise DocumentError("truncated gzip file (it ends before the compressed data does)")
            rest = d.unused_data.lstrip(b"\x00")  # members may be followed by zero padding
    except zlib.error as exc:
        raise DocumentError(f"not a valid gzip file: {exc}") from None
    return b"".join(out)


def _decode(raw: bytes) -> str:
    """UTF-8 text, or UTF-16/32 with a byte-order mark; otherwise say which byte is wrong."""
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(codec)
            except UnicodeDecodeError as exc:
                raise DocumentError(f"not valid {codec.upper().removesuffix('-SIG')} text "
                                    f"(byte offset {exc.start}: {exc.reason})") from None
    codec = json.detect_encoding(raw) if b"\x00" in raw[:4] else "utf-8"  # RFC 8259: NULs mark UTF-16/32
    try:
        return raw.decode(codec)
    except UnicodeDecodeError as exc:
        if codec != "utf-8":
            raise DocumentError(f"not valid {codec.upper()} text (byte offset {exc.start}: {exc.reason}); "
                                "save it as UTF-8") from None
        hint = "; save it as UTF-8"
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DocumentError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                            f"(line {line}) {exc.reason}{hint}", line) from None


def _too_deep(max_depth: int) -> DocumentError:
    return DocumentError(f"document nested too deeply: at most {max_depth} levels of mappings and lists")


def _check_depth(data: Any, max_depth: int) -> None:
    """Nesting of parsed data, measured without recursion (the point is to stay far from the limit)."""
    if not isinstance(data, dict | list):
        return
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(max_depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def _json_message(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
    return _number_message(exc)


def _number_message(exc: Exception) -> str:
    if "integer string conversion" in str(exc):
        return "a number has more than 4,300 digits"
    return str(exc)


def _json_position(exc: ValueError) -> tuple[int, int]:
    if isinstance(exc, json.JSONDecodeError):
        return exc.lineno, exc.colno
    return 0, 0


#: What an empty document (no characters but white space, or YAML comments only) is told, JSON or YAML alike.
EMPTY = "the document is empty: expected a mapping of fields (JSON or YAML)"


def _tab(text: str, line: int, column: int) -> str:
    """A hint when a YAML error sits on a tab: YAML indents with spaces only, and libyaml's own words for it
    ("found character that cannot start any token") never say so."""
    lines = text.splitlines()
    if 0 <= line < len(lines) and "\t" in lines[line][: column + 1]:
        return f"; line {line + 1} has a tab: YAML indents with spaces only"
    return ""


def _yaml(text: str, max_depth: int) -> Any:
    """YAML in two passes over libyaml: the event stream (cheap, flat) is checked for aliases,
    anchors and depth before any node is built, then the document is loaded."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_YamlLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                mark = event.start_mark
                raise DocumentError(f"YAML anchors and aliases are not accepted (line {mark.line + 1}, "
                                    f"column {mark.column + 1})", mark.line + 1, mark.column + 1)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise _too_deep(max_depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        data = yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader; one document, like safe_load
    except DocumentError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        hint = _tab(text, mark.line, mark.column) if mark is not None else ""
        raise DocumentError(f"invalid YAML: {_one_line(exc)}{hint}", *where) from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"invalid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise _too_deep(max_depth) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. an integer over Python's 4,300-digit limit
        raise DocumentError(f"invalid YAML value: {_number_message(exc)}") from None
    if data is None:  # comments only
        raise DocumentError(EMPTY)
    return data


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def json_safe(value: Any) -> Any:
    """`value` with NaN and infinities as None, through dicts and lists: valid JSON (json.dumps writes NaN, which
    other readers refuse), and a NaN compares equal to itself once it is None."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
