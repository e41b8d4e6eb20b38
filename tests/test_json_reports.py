"""--json on every command, and docs/json-reports.md true to the report models: every command
has a report there, and a report's keys are the documented ones, with `kind` and `exit_code`."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import WRITE_TOKEN
from helpers import run_cli
from json_reports import COMMON, DOC, rendered, reports
from test_width import commands


def leaf_commands() -> dict[str, object]:
    return {
        " ".join(words): command
        for words, command in commands()
        if words and not hasattr(command, "commands")
    }


def test_the_json_reports_doc_is_what_the_models_say() -> None:
    assert DOC.read_text(encoding="utf-8") == rendered(), "run `python tests/json_reports.py`"


def test_every_command_takes_json_and_has_its_report_documented() -> None:
    leaves = leaf_commands()
    without = [
        name
        for name, command in leaves.items()
        if "--json" not in {o for p in command.params for o in p.opts}
    ]
    assert not without, without
    assert sorted(leaves) == sorted(reports())


def documented_keys(kind: str) -> set[str]:
    model = reports()[kind]
    return {
        *COMMON,
        *(n for n, f in model.model_fields.items() if not f.exclude),
        *model.model_computed_fields,
    }


def test_a_report_says_its_kind_and_holds_the_documented_keys(tmp_path: Path, repo_id: str) -> None:
    (tmp_path / "out").mkdir()
    for kind, args in [
        ("template", ["template", "nightly-sync"]),
        ("collect", ["collect", tmp_path / "out", "-o", tmp_path / "b"]),
        ("tasks list", ["tasks", "list", "--repo", repo_id]),
    ]:
        result = run_cli(*args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
        report = json.loads(result.stdout)
        assert report["kind"] == kind and report["exit_code"] == result.returncode, report
        assert set(report) == documented_keys(kind), kind


def test_the_error_object_says_it_is_one() -> None:
    result = run_cli("inspect", "no-such.tar.zst", "--json")
    assert result.returncode == 2
    error = json.loads(result.stdout)
    assert set(error) == {"kind", "error", "hint", "error_kind", "exit_code"}
    assert error["kind"] == "error" and error["exit_code"] == 2
