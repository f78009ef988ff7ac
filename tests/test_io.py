"""The document parser both faces share: hostile or malformed bytes give one clear DocumentError."""

from __future__ import annotations

import codecs
import gzip
import json
from pathlib import Path

import pytest
import yaml

from placement.io import MAX_DEPTH, DocumentError, load_document, parse_document

DOC = {"cluster": {"nodes": [{"name": "n1", "gpus": [1, 2]}]}, "jobs": [], "note": "é"}


@pytest.mark.parametrize("suffix", [None, ".json", ".yaml", ".yml"])
def test_json_and_yaml_parse_to_the_same_data(suffix: str | None) -> None:
    raw = (yaml.safe_dump(DOC) if suffix in (".yaml", ".yml") else json.dumps(DOC)).encode()
    assert parse_document(raw, suffix) == DOC


def test_without_a_suffix_json_is_tried_first_then_yaml() -> None:
    assert parse_document(b"a: 1\nb: [x, y]\n", None) == {"a": 1, "b": ["x", "y"]}
    assert parse_document(b'{"a": 1}', None) == {"a": 1}


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-32", "utf-16-le", "utf-16-be", "utf-32-le"])
def test_utf_8_with_bom_and_utf_16_32_are_decoded(codec: str) -> None:
    raw = json.dumps(DOC, ensure_ascii=False).encode(codec)
    assert parse_document(raw, ".json") == DOC
    assert parse_document(raw, None) == DOC


@pytest.mark.parametrize("suffix", [None, ".json", ".yaml"])
def test_text_that_is_not_utf_8_is_a_clear_error(suffix: str | None) -> None:
    with pytest.raises(DocumentError, match=r"not UTF-8 text: byte 0xe9 at offset 7 .*save it as UTF-8"):
        parse_document('{"a": "é"}'.encode("latin-1"), suffix)
    with pytest.raises(DocumentError, match="not valid UTF-16"):
        parse_document(codecs.BOM_UTF16_LE + b"{\x00\x00", suffix)


@pytest.mark.parametrize("suffix", [None, ".json", ".yaml"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 100_000])
def test_deep_nesting_is_refused_without_a_recursion_error(suffix: str | None, depth: int) -> None:
    raw = b"[" * depth + b"]" * depth
    with pytest.raises(DocumentError, match="nested too deeply|nesting depth"):
        parse_document(raw, suffix)
    block = "a:\n" + "".join("  " * i + "- \n" for i in range(1, depth if depth < 2000 else 2000))
    with pytest.raises(DocumentError, match="nested too deeply"):
        parse_document(block.encode(), ".yaml")


def test_nesting_up_to_the_limit_is_accepted() -> None:
    raw = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert parse_document(raw, ".json") == parse_document(raw, ".yaml")


def test_yaml_aliases_and_anchors_are_refused() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9))
    with pytest.raises(DocumentError, match="anchors and aliases are not accepted"):
        parse_document(bomb.encode(), ".yaml")
    with pytest.raises(DocumentError, match="anchors and aliases"):
        parse_document(b"a: &x 1\n", None)


def test_size_limit_counts_raw_and_decompressed_bytes() -> None:
    with pytest.raises(DocumentError, match="the limit is 10"):
        parse_document(b'{"a": [1, 2, 3, 4]}', ".json", max_bytes=10)
    bomb = gzip.compress(b" " * (64 * 1024 * 1024))  # 64 MB of spaces in ~64 kB
    with pytest.raises(DocumentError, match="decompressed document exceeds the limit"):
        parse_document(bomb, ".json.gz", max_bytes=1024 * 1024)


def test_gzip_members_and_bad_gzip() -> None:
    assert parse_document(gzip.compress(b'{"a":') + gzip.compress(b"1}"), ".json.gz") == {"a": 1}
    assert parse_document(gzip.compress(b"a: 1\n"), ".yaml.gz") == {"a": 1}
    with pytest.raises(DocumentError, match="not a gzip file"):
        parse_document(b'{"a": 1}', ".gz")
    with pytest.raises(DocumentError, match="truncated gzip"):
        parse_document(gzip.compress(b'{"a": 1}')[:-12], ".gz")


def test_syntax_errors_give_the_position_and_stay_compatible() -> None:
    with pytest.raises(DocumentError, match=r"invalid JSON: Expecting .* \(line 2, column 6\)") as info:
        parse_document(b'{"a":\n  1, ]}', ".json")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, json.JSONDecodeError) and isinstance(info.value, yaml.YAMLError)
    assert info.value.lineno == 2
    with pytest.raises(DocumentError, match="invalid YAML"):
        parse_document(b"a: [1, 2\nb: 3\n", ".yaml")
    with pytest.raises(DocumentError, match="a single document"):
        parse_document(b"a: 1\n---\nb: 2\n", ".yaml")
    with pytest.raises(DocumentError, match="more than 4,300 digits"):
        parse_document(b'{"a": ' + b"9" * 5000 + b"}", ".json")


def test_load_document_names_the_file_and_keeps_missing_files_os_errors(tmp_path: Path) -> None:
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(json.dumps(DOC).encode()))
    assert load_document(tmp_path / "r.json.gz") == DOC
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(DOC), encoding="utf-16")
    assert load_document(tmp_path / "r.yaml") == DOC
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe\xfd")
    with pytest.raises(DocumentError, match=str(bad)):
        load_document(bad)
    with pytest.raises(DocumentError, match="file is 3 bytes; the limit is 2"):
        load_document(bad, max_bytes=2)
    with pytest.raises(FileNotFoundError):
        load_document(tmp_path / "missing.json")


def test_bundled_instances_still_load() -> None:
    files = [p for p in Path("instances").rglob("*") if p.suffix in (".json", ".yaml", ".yml", ".gz")]
    assert files
    for p in files:
        assert load_document(p) is not None
