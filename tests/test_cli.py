"""The `placement` command end to end: exit codes 0 / 1 / 2, files in and out, messages on stderr."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from placement_models import PlacementRequest, Plan

from placement import cli
from placement.cli import main
from placement.verify import verify

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "instances" / "example.json"
README = ROOT / "README.md"


def _small_request() -> dict:
    return {
        "cluster": {"nodes": [{"name": f"n{i}", "gpus": 8, "gpu_model": "H100-SXM5-80GB", "cpu": 64,
                               "memory_gib": 512} for i in range(2)]},
        "jobs": [
            {"name": "big", "priority": 10, "tasks": [{"name": "w", "replicas": 2, "gpus": 8}]},
            {"name": "small", "tasks": [{"name": "w", "gpus": 1}]},
        ],
        "policy": {"time_limit_s": 5, "deterministic": True},
    }


def test_solve_example_writes_a_verified_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    assert main(["solve", str(EXAMPLE), "-o", str(out), "--time-limit", "5", "--deterministic"]) == 0
    plan = Plan.model_validate_json(out.read_text())
    request = PlacementRequest.model_validate(json.loads(EXAMPLE.read_text()))
    assert verify(request, plan) == []
    placed = {a.job for a in plan.assignments}
    assert "llm-pretrain" in placed  # the priority-100 gang of the bundled example fits its cluster
    assert sum(1 for a in plan.assignments if a.job == "llm-pretrain") == 9
    err = capsys.readouterr().err
    assert "status" in err and "pending" in err and plan.solver.mode == "deterministic"


def test_solve_reads_yaml_and_prints_plan_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(yaml.safe_dump(_small_request()))
    assert main(["solve", str(req)]) == 0
    plan = Plan.model_validate_json(capsys.readouterr().out)
    assert {a.job for a in plan.assignments} == {"big"}  # the 2×8 gang takes both nodes
    assert [p.job for p in plan.pending] == ["small"]


def test_invalid_request_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_request()
    data["cluster"]["nodes"][1]["gpu_model"] = "H300"
    data["jobs"][0]["min_available"] = 5
    req = tmp_path / "bad.json"
    req.write_text(json.dumps(data))
    assert main(["solve", str(req)]) == 2
    err = capsys.readouterr().err
    assert "jobs[0].min_available: 5 exceeds the job's 2 pods" in err


def test_unknown_gpu_model_exits_2_with_known_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_request()
    data["cluster"]["nodes"][1]["gpu_model"] = "H300"
    req = tmp_path / "bad.json"
    req.write_text(json.dumps(data))
    assert main(["solve", str(req)]) == 2
    err = capsys.readouterr().err
    assert "cluster.nodes[1].gpu_model: unknown GPU model 'H300'" in err and "H100-SXM5-80GB" in err


def test_missing_and_malformed_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(tmp_path / "nope.json")]) == 2
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["solve", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "invalid JSON" in err


def test_verify_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_small_request()))
    plan_file = tmp_path / "plan.json"
    assert main(["solve", str(req), "-o", str(plan_file)]) == 0
    assert main(["verify", str(req), str(plan_file)]) == 0

    # hand-break the plan: give the second pod of the gang the first pod's GPUs on the same node
    plan = json.loads(plan_file.read_text())
    first, second = [a for a in plan["assignments"] if a["job"] == "big"]
    second["node"], second["gpus"] = first["node"], first["gpus"]
    plan_file.write_text(json.dumps(plan))
    capsys.readouterr()
    assert main(["verify", str(req), str(plan_file)]) == 1
    out = capsys.readouterr().out
    assert f"gpus: GPU {first['gpus'][0]} of node {first['node']} is given to both pod big/w/0 and pod big/w/1" in out

    plan_file.write_text(json.dumps({"status": "nonsense"}))
    assert main(["verify", str(req), str(plan_file)]) == 2


def test_generate_is_seeded(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    assert main(["generate", "--nodes", "16", "--jobs", "20", "--seed", "3", "-o", str(a)]) == 0
    assert main(["generate", "--nodes", "16", "--jobs", "20", "--seed", "3", "-o", str(b)]) == 0
    assert main(["generate", "--nodes", "16", "--jobs", "20", "--seed", "4", "-o", str(c)]) == 0
    assert a.read_text() == b.read_text() != c.read_text()
    PlacementRequest.model_validate(json.loads(a.read_text()))


def test_bench_over_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "one.json").write_text(json.dumps(_small_request()))
    rows = tmp_path / "rows.json"
    assert main(["bench", str(tmp_path), "--time-limit", "2", "--json", str(rows)]) == 0
    [row] = json.loads(rows.read_text())
    assert row["nodes"] == 2 and row["gpus_placed"] == 16 and row["greedy_gpus_placed"] == 16
    assert row["objective"] >= row["greedy_objective"]
    assert "variables" in capsys.readouterr().out


def test_bench_without_target_lists_the_benches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.NAMED_BENCHES:
        assert f"\n  {name} " in out
    assert main(["bench"]) == 2
    assert "usage: placement bench TARGET" in capsys.readouterr().err


@pytest.mark.parametrize("name", cli.NAMED_BENCHES)
def test_each_named_bench_reaches_its_own_parser(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", name, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and "target" not in out.split("\n")[0]  # not the instance bench's parser


# ------------------------------------------------------------------------------------------------
# Hostile input: one `error:` line naming the problem, exit 2, never a traceback


def _hostile(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (a file, a fragment its error line must contain)."""
    req = json.dumps(_small_request())
    cases: dict[str, tuple[bytes, str, str]] = {
        "latin-1": (req.replace('"big"', '"gro\u00df"').encode("latin-1"), ".json", "UTF-8"),
        "broken-utf-16": (req.encode("utf-16")[:-1], ".json", "UTF-16"),  # an odd number of bytes
        "deep-json": (b"[" * 1000 + b"]" * 1000, ".json", "nest"),
        "deep-in-request": (('{"cluster": {"nodes": ' + "[" * 5000 + "]" * 5000 + "}}").encode(), ".json",
                            "nest"),
        "deep-yaml": (b"a: " + b"[" * 1000 + b"]" * 1000, ".yaml", "nest"),
        "yaml-aliases": (b"a: &x [1, 2]\nb: [*x, *x]\n", ".yaml", "aliases"),
        "binary": (bytes(range(256)) * 4, ".json", "UTF-8"),
        "empty": (b"", ".json", "the document is empty"),
        "empty-yaml": (b"# only a comment\n", ".yaml", "the document is empty"),
        "yaml-tab": (b"cluster:\n\tnodes: []\n", ".yaml", "line 2 has a tab"),
        "bad-gzip": (b"\x1f\x8b\x08\x00junk", ".json.gz", "gzip"),
        "not-gzip": (req.encode(), ".json.gz", "gzip"),
        "huge-number": (b'{"jobs": [' + b"9" * 5000 + b"]}", ".json", "4,300 digits"),
    }
    out = {}
    for name, (raw, suffix, fragment) in cases.items():
        path = tmp / f"{name}{suffix}"
        path.write_bytes(raw)
        out[name] = (path, fragment)
    folder = tmp / "folder.json"
    folder.mkdir()
    out["folder"] = (folder, "is a folder")
    return out


HOSTILE = ["latin-1", "broken-utf-16", "deep-json", "deep-in-request", "deep-yaml", "yaml-aliases", "binary",
           "empty", "empty-yaml", "yaml-tab", "bad-gzip", "not-gzip", "huge-number", "folder"]


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("command", ["solve", "verify-request", "verify-plan", "export", "what-if"])
def test_hostile_files_end_in_an_error_line(name: str, command: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path, fragment = _hostile(tmp_path)[name]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_small_request()))
    argv = {
        "solve": ["solve", str(path)],
        "verify-request": ["verify", str(path), str(good)],
        "verify-plan": ["verify", str(good), str(path)],
        "export": ["export", str(path), "-o", str(tmp_path / "m.pb")],
        "what-if": ["what-if", str(path), "--scenario", str(path)],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and fragment in err, err
    assert "Traceback" not in err and "unexpected" not in err
    assert not (tmp_path / "m.pb").exists()


def test_utf16_with_bom_and_gzip_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """UTF-16 (with its byte-order mark, or without as RFC 8259 allows) is text a Windows editor writes: it is
    read, not refused."""
    bom = tmp_path / "windows.json"
    bom.write_bytes(json.dumps(_small_request()).encode("utf-16"))
    plain = tmp_path / "plain16.json"
    plain.write_bytes(json.dumps(_small_request()).encode("utf-16-le"))
    packed = tmp_path / "packed.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(_small_request()).encode()))
    for path in (bom, plain, packed):
        assert main(["solve", str(path)]) == 0
        assert Plan.model_validate_json(capsys.readouterr().out).status


def test_a_traceback_never_reaches_the_user(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever breaks inside, the command ends in an error line and exit 2; PLACEMENT_DEBUG=1 re-raises."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_small_request()))

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr("placement.api.plan", broken)
    assert main(["solve", str(req)]) == 2
    assert capsys.readouterr().err.startswith("error: unexpected KeyError: 'boom'")
    monkeypatch.setenv("PLACEMENT_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["solve", str(req)])


@pytest.mark.parametrize("command", ["solve", "generate", "export"])
def test_output_folder_is_checked_before_the_work(command: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_small_request()))
    called = []
    monkeypatch.setattr("placement.api.plan", lambda *a, **k: called.append(a))
    monkeypatch.setattr("placement.generate.generate", lambda *a, **k: called.append(a))
    monkeypatch.setattr("placement.export.build_model", lambda *a, **k: called.append(a))
    target = tmp_path / "missing" / "out.json"
    argv = {"solve": ["solve", str(req), "-o", str(target)],
            "generate": ["generate", "--nodes", "2", "--jobs", "2", "-o", str(target)],
            "export": ["export", str(req), "-o", str(target.with_suffix(".pb"))]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write") and "missing does not exist" in err
    assert called == []  # refused before solving, generating or compiling
    assert main([*argv[:-1], str(tmp_path)]) == 2  # a folder is not a file name
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("argv, fragment", [
    (["generate", "--nodes", "0", "--jobs", "5"], "--nodes: must be at least 1, not 0"),
    (["generate", "--nodes", "2", "--jobs", "-1"], "--jobs: must be at least 0, not -1"),
    (["generate", "--nodes", "two", "--jobs", "1"], "--nodes: must be a whole number"),
])
def test_generate_refuses_impossible_sizes(argv: list[str], fragment: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and fragment in err and "Traceback" not in err


def test_generate_refuses_sizes_past_its_cap(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo (--nodes 10000000) would fill the machine's memory; the cap is lowered here to keep the test fast."""
    monkeypatch.setattr("placement.generate.MAX_NODES", 4)
    monkeypatch.setattr("placement.generate.MAX_JOBS", 9)
    assert main(["generate", "--nodes", "5", "--jobs", "1"]) == 2
    assert "error: nodes must be at most 4, not 5" in capsys.readouterr().err
    assert main(["generate", "--nodes", "4", "--jobs", "10"]) == 2
    assert "error: jobs must be at most 9, not 10" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# Standard input and the size cap


def _stdin(monkeypatch: pytest.MonkeyPatch, raw: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))


def test_dash_reads_the_request_from_stdin(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, yaml.safe_dump(_small_request()).encode())  # YAML too: JSON first, then YAML
    assert main(["solve", "-", "-o", "-"]) == 0
    plan = Plan.model_validate_json(capsys.readouterr().out)
    assert {a.job for a in plan.assignments} == {"big"}


def test_dash_reads_gzip_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, gzip.compress(json.dumps(_small_request()).encode()))
    assert main(["solve", "-"]) == 0
    assert Plan.model_validate_json(capsys.readouterr().out).assignments


def test_a_file_name_with_a_nul_byte_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "req\x00.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: request file") and "unexpected" not in err


def test_dash_reads_the_plan_for_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_small_request()))
    plan_file = tmp_path / "plan.json"
    assert main(["solve", str(req), "-o", str(plan_file)]) == 0
    _stdin(monkeypatch, plan_file.read_bytes())
    assert main(["verify", str(req), "-"]) == 0
    assert "valid: 2 pods of 1 job, 1 pending" in capsys.readouterr().err
    assert main(["verify", "-", "-"]) == 2


def test_stdin_errors_name_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, b'{"a": "\xc3\x28"}')
    assert main(["solve", "-"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: request on standard input: not UTF-8 text")


def test_inputs_past_the_size_cap_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_small_request()))
    monkeypatch.setenv("PLACEMENT_MAX_INPUT_BYTES", "100")
    assert main(["solve", str(req)]) == 2
    assert "the limit is 100" in capsys.readouterr().err
    _stdin(monkeypatch, req.read_bytes())
    assert main(["solve", "-"]) == 2
    assert "the limit is 100" in capsys.readouterr().err
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b"0," * 10_000 + b"0]"))  # small packed, big unpacked
    assert main(["solve", str(bomb)]) == 2
    assert "exceeds the limit of 100 bytes" in capsys.readouterr().err
    monkeypatch.setenv("PLACEMENT_MAX_INPUT_BYTES", "lots")
    assert main(["solve", str(req)]) == 2
    assert "PLACEMENT_MAX_INPUT_BYTES must be a whole number" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# verify agrees with solve about bad input; the library takes dicts


def test_verify_rejects_an_unknown_gpu_model_like_solve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "req.json"
    good.write_text(json.dumps(_small_request()))
    plan_file = tmp_path / "plan.json"
    assert main(["solve", str(good), "-o", str(plan_file)]) == 0
    data = _small_request()
    data["cluster"]["nodes"][1]["gpu_model"] = "H300"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["solve", str(bad)]) == 2
    solve_err = capsys.readouterr().err
    assert main(["verify", str(bad), str(plan_file)]) == 2
    verify_err = capsys.readouterr().err
    assert "cluster.nodes[1].gpu_model: unknown GPU model 'H300'" in verify_err
    assert verify_err == solve_err  # the same lines, word for word


def test_library_verify_takes_dicts_like_plan() -> None:
    from pydantic import ValidationError

    import placement
    import placement.verify  # the subpackage: `placement.verify` must stay the function all the same

    request = _small_request()
    result = placement.plan(request)
    assert placement.verify(request, result) == []
    assert placement.verify(request, result.model_dump(mode="json")) == []
    assert placement.verify(PlacementRequest.model_validate(request), result) == []
    broken = result.model_dump(mode="json")
    broken["assignments"][1]["gpus"] = broken["assignments"][0]["gpus"]
    broken["assignments"][1]["node"] = broken["assignments"][0]["node"]
    assert any(v.startswith("gpus:") for v in placement.verify(request, broken))
    with pytest.raises(ValidationError, match="assignments"):
        placement.verify(request, {"status": "optimal", "assignments": "none"})
    with pytest.raises(ValidationError):
        placement.verify({"cluster": "none"}, result)


@pytest.mark.parametrize("command", ["solve", "verify", "export"])
def test_a_node_without_gpus_is_an_error_naming_the_field(command: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_request()
    del data["cluster"]["nodes"][1]["gpus"]
    req = tmp_path / "req.json"
    req.write_text(json.dumps(data))
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"status": "feasible"}))
    argv = {"solve": [str(req)], "verify": [str(req), str(plan_file)], "export": [str(req), "-o",
                                                                                   str(tmp_path / "m.pb")]}
    assert main([command, *argv[command]]) == 2
    err = capsys.readouterr().err
    assert "cluster.nodes[1].gpus: node n1 names gpu_model" in err and "out of range" not in err
    data["cluster"]["nodes"][1]["gpus"] = 0  # said on purpose: a node without GPUs
    req.write_text(json.dumps(data))
    assert main(["solve", str(req)]) == 0


# ------------------------------------------------------------------------------------------------
# What people read: summaries, help, the README


def test_summary_counts_read_as_english(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_request()
    data["jobs"] = [{"name": "one", "tasks": [{"name": "w", "gpus": 1}]}]
    req = tmp_path / "req.json"
    req.write_text(json.dumps(data))
    assert main(["solve", str(req)]) == 0
    err = capsys.readouterr().err
    assert "placed 1 job, 1 pod, 1 whole GPU; pending 0 jobs" in err
    assert "None" not in err


def test_summary_without_a_gap_says_n_a() -> None:
    plan = Plan.model_validate({"status": "feasible", "objective": {"total": 1.0}})
    text = cli.summary(plan)
    assert "gap n/a" in text and "None" not in text


@pytest.mark.parametrize("argv", [["--help"], ["solve", "--help"], ["verify", "--help"], ["export", "--help"]])
def test_help_loads_no_solver_or_validation_stack(argv: list[str]) -> None:
    code = ("import sys\nfrom placement.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = ('ortools', 'numpy', 'networkx', 'pydantic', 'placement_models', 'yaml', 'placement.api')\n"
            "print('LOADED', sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert "usage: placement" in out and out.strip().endswith("LOADED []"), out


def test_what_if_help_still_reaches_its_own_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["what-if", "--help"])
    assert exit_.value.code == 0
    assert "--scenario" in capsys.readouterr().out


def _readme_commands() -> list[str]:
    """The command lines of the README's Commands section (the sections of other faces test their own)."""
    text = README.read_text().split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block.replace("\\\n", " ") for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("placement ")]


def test_readme_commands_are_real_commands() -> None:
    """Every example line parses with the command's own parser; `|` in a shell block is a pipe, never 'or'."""
    lines = _readme_commands()
    assert any(line.startswith("placement export") for line in lines)
    ap = cli.parser()
    for line in lines:
        words = shlex.split(line, comments=True)
        assert not any("|" in w for w in words), line
        if any(w.startswith("[") for w in words) or words[1] not in ("solve", "verify", "generate", "export"):
            continue  # a synopsis with [optional] parts, or a command that parses its own arguments
        ap.parse_args(words[1:])  # SystemExit(2) on a missing -o or an unknown option


def test_readme_prose_exports_name_an_output() -> None:
    for mention in re.findall(r"`(placement export[^`]*)`", README.read_text()):
        assert " -o " in mention, mention


def test_readme_python_snippet_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    [snippet] = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    assert namespace["result"].status in ("optimal", "feasible")  # type: ignore[attr-defined]


def test_written_files_get_ordinary_modes(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        out = tmp_path / "req.json"
        assert main(["generate", "--nodes", "2", "--jobs", "2", "-o", str(out)]) == 0
        model = tmp_path / "m.pb"
        assert main(["export", str(out), "-o", str(model)]) == 0
    finally:
        os.umask(mask)
    assert oct(out.stat().st_mode & 0o777) == oct(model.stat().st_mode & 0o777) == "0o644"


def test_subcommands_reading_their_own_files_end_in_an_error_line(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "latin.json"
    bad.write_bytes(b'{"a": "\xe9"}')
    assert main(["bench", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not UTF-8" in err and "unexpected" not in err


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_input_is_cut_at_the_cap(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A device or a pipe has no size to check first: at most the cap is read, then the input is refused."""
    monkeypatch.setenv("PLACEMENT_MAX_INPUT_BYTES", "1000")
    assert main(["solve", "/dev/zero"]) == 2
    assert "the limit is 1000" in capsys.readouterr().err


def test_solve_says_a_plan_without_time_to_score_it_is_unscored(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from placement.generate import generate

    req = tmp_path / "req.json"
    req.write_text(json.dumps(generate(64, 150, 1)))
    out = tmp_path / "plan.json"
    assert main(["solve", str(req), "-o", str(out), "--time-limit", "0.01", "--deterministic"]) == 0
    err = capsys.readouterr().err
    assert "objective n/a (unscored)" in err and "unscored" in Plan.model_validate_json(out.read_text()).solver.note
