"""inspect: what a reviewer sees about one bundle, as data and as rendered by the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factory import RunSpec
from helpers import build, forge, one_line_error, only_bundle, read_members, run_cli

from bundler.core.errors import UsageError
from bundler.hub.leaderboard.rows import build_row
from bundler.local.collect import CollectOptions
from bundler.local.inspection import inspect_bundle
from bundler.local.manifest import Sidecar

ROWS = 22


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    spec = RunSpec(
        model="Qwen/Qwen3.5-27B",
        rows=ROWS,
        resolved_revision=None,
        git_sha="0123abcd-dirty",
        extra_capabilities={"coordinate_mode": "normalised"},
    )
    report, _ = build(tmp_path, [spec], CollectOptions(expected_rows={"expert-vqa": ROWS}))
    return Path(only_bundle(report).archive)


def test_inspection_as_data(archive: Path) -> None:
    inspection = inspect_bundle(archive)
    assert inspection.verification.ok
    claim = inspection.claim
    assert claim is not None
    assert claim.target == "expert-vqa@unpinned" and not claim.statics.is_pinned
    assert claim.model_name == "Qwen/Qwen3.5-27B"
    assert claim.provenance["git_sha"] == "0123abcd-dirty"
    assert claim.coverage.status == "complete"
    # rows 3, 10, 17 carry an error; rows 5, 16 an exception
    assert (claim.predictions.errors, claim.predictions.exceptions) == (3, 2)
    assert inspection.error_rate == pytest.approx(3 / ROWS)
    assert inspection.exception_rate == pytest.approx(2 / ROWS)
    assert claim.predictions.usage["input_tokens"] == sum(1200 + i for i in range(ROWS))
    assert inspection.capabilities is not None
    assert inspection.capabilities["coordinate_mode"] == "normalised"
    metrics = {metric.name: metric for metric in inspection.metrics}
    assert metrics["exact_match.accuracy"].number == 0.62
    assert metrics["expert-vqa_scorer.per_module.maze"].number == 0.3
    warnings = " | ".join(claim.warnings)
    assert "unpinned" in warnings and "dirty" in warnings


def test_inspect_command_shows_what_a_reviewer_needs(archive: Path) -> None:
    result = run_cli("inspect", archive)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    out = result.stderr
    for expected in (
        "qwen-qwen3-5-27b_",
        "expert-vqa@unpinned",
        "intact",
        "UNPINNED",
        "DIRTY TREE",
        "Qwen/Qwen3.5-27B",
        "complete: 22 of 22 rows",
        "errors 3 (13.6%)",
        "exceptions 2 (9.1%)",
        "input_tokens",
        "exact_match.accuracy",
        "0.62",
        "harness tree was dirty",
    ):
        assert expected in out, (expected, out)
    fingerprint = json.loads(
        archive.with_name(archive.name.removesuffix(".tar.zst") + ".json").read_text()
    )["capability_fingerprint"]
    assert fingerprint in out


def test_inspect_json(archive: Path) -> None:
    result = run_cli("inspect", archive, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["exit_code"] == 0
    assert data["claim"]["statics"]["revision_label"] == "unpinned"
    assert data["claim"]["coverage"]["status"] == "complete"
    assert data["error_rate"] == pytest.approx(3 / ROWS)
    assert {metric["name"] for metric in data["metrics"]} >= {"exact_match.accuracy"}
    assert all(check["status"] != "failed" for check in data["verification"]["checks"])


def test_inspect_a_tampered_bundle_shows_the_failure(archive: Path) -> None:
    def tamper(members: list) -> list:  # type: ignore[type-arg]
        members[4].data = members[4].data.replace(b"answer", b"ANSWER")
        return members

    forge(archive, tamper)
    inspection = inspect_bundle(archive)
    assert not inspection.verification.ok
    result = run_cli("inspect", archive)
    assert result.returncode == 1
    assert "FAILED verification" in result.stderr
    assert "sha256 differs from the manifest" in result.stderr


def test_pinned_clean_bundle_is_not_flagged(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [RunSpec(rows=2)], CollectOptions(expected_rows={"expert-vqa": 2}))
    result = run_cli("inspect", only_bundle(report).archive)
    assert result.returncode == 0
    assert "pinned a1b2c3d4e5f60718293a4b5c6d7e8f9012345678" in result.stderr
    assert "UNPINNED" not in result.stderr and "DIRTY" not in result.stderr


def test_inspect_missing_archive(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        inspect_bundle(tmp_path / "nope.tar.zst")
    result = run_cli("inspect", tmp_path / "nope.tar.zst")
    assert result.returncode == 2
    assert "no such bundle archive" in result.stderr


HUGE = 10**400
"""An integer metrics.json may hold that no float64 can: it stays verbatim, its number null."""


def test_metrics_beyond_float64_are_kept_verbatim_and_crash_nothing(tmp_path: Path) -> None:
    spec = RunSpec(rows=2, metrics={"s": {"huge": HUGE, "nan": float("nan"), "ok": 0.5}})
    report, _ = build(tmp_path, [spec])
    bundle = only_bundle(report)
    source = (tmp_path / "out/expert-vqa_predictions/gpt-5.2/metrics.json").read_bytes()
    members = {member.name: member.data for member in read_members(Path(bundle.archive))}
    assert members["metrics.json"] == source and str(HUGE).encode() in source
    metrics = {metric.name: metric for metric in inspect_bundle(Path(bundle.archive)).metrics}
    assert metrics["s.huge"].number is None and metrics["s.huge"].json_value == str(HUGE)
    assert metrics["s.nan"].number is None and metrics["s.nan"].json_value == "NaN"
    assert metrics["s.ok"].number == 0.5
    shown = run_cli("inspect", bundle.archive)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr and str(HUGE)[:60] in shown.stderr
    as_json = run_cli("inspect", bundle.archive, "--json")
    assert as_json.returncode == 0, as_json.stderr
    numbers = {m["name"]: m["number"] for m in json.loads(as_json.stdout)["metrics"]}
    assert numbers == {"s.huge": None, "s.nan": None, "s.ok": 0.5}


def test_the_row_builder_gives_null_for_metrics_beyond_float64(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [RunSpec(rows=2, metrics={"s": {"huge": HUGE, "n": 3}})])
    bundle = only_bundle(report)
    sidecar = Sidecar.model_validate_json(Path(bundle.sidecar).read_bytes())
    metrics_json = json.dumps({"s": {"huge": HUGE, "n": 3}})
    row = build_row(sidecar, metrics_json, published_at="2026-06-16T08:00:00Z").model_dump(
        mode="json"
    )
    assert row["metrics"] == [
        {"name": "s.huge", "number": None, "json_value": str(HUGE)},
        {"name": "s.n", "number": 3.0, "json_value": "3"},
    ]
    assert row["metrics_json"] == metrics_json


def test_inspect_refuses_what_is_not_one_bundle_archive(archive: Path) -> None:
    sidecar = archive.with_name(archive.name.removesuffix(".tar.zst") + ".json")
    for path in (sidecar, archive.parent):
        with pytest.raises(UsageError, match=r"not a \.tar\.zst bundle"):
            inspect_bundle(path)
        result = run_cli("inspect", path)
        assert result.returncode == 2
        assert "not a .tar.zst bundle" in one_line_error(result.stderr)
