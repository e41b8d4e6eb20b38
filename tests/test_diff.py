"""diff: how two real bundles differ, as data and as the command shows it."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factory import RunSpec, write_tree
from helpers import build, forge, one_line_error, only_bundle, read_members, run_cli, strict_json

from bundler.core.errors import UsageError
from bundler.local.collect import CollectOptions
from bundler.local.diff import (
    BundleDiff,
    FieldDifference,
    MetricDifference,
    claim_differences,
    diff_bundles,
    metric_differences,
    read_archive_members,
)
from bundler.local.submitter import Submitter
from bundler.local.verify import read_bundle

LATER = "2026-06-16T08:00:01.5Z"


def bundle(tmp: Path, spec: RunSpec, options: CollectOptions | None = None) -> Path:
    """Collect one run into its own folder below `tmp` and return the archive."""
    report, _ = build(tmp, [spec], options)
    return Path(only_bundle(report).archive)


def bundle_with_run_meta(
    tmp: Path, spec: RunSpec, change: Callable[[dict[str, Any]], None]
) -> Path:
    """Collect one run whose run_meta.json `change` edited first, for fields that the harness
    may write but RunSpec does not (extra keys, unknown keys inside `statics`)."""
    (run_dir,) = write_tree(tmp / "out", [spec], how_do_you=False)
    run_meta = run_dir / "run_meta.json"
    edited = json.loads(run_meta.read_text())
    change(edited)
    run_meta.write_text(json.dumps(edited))
    return bundle(tmp, spec)


@pytest.fixture
def original(tmp_path: Path) -> Path:
    return bundle(tmp_path / "a", RunSpec(rows=5))


def test_a_copy_is_identical(original: Path, tmp_path: Path) -> None:
    copy_dir = tmp_path / "copy" / original.parent.name
    copy_dir.mkdir(parents=True)
    shutil.copy(original, copy_dir)
    shutil.copy(original.with_suffix("").with_suffix(".json"), copy_dir)
    diff = diff_bundles(original, copy_dir / original.name)
    assert diff.identical and diff.exit_code == 0
    assert (diff.claims, diff.files, diff.metrics) == ([], [], [])
    assert diff.predictions.unchanged == 5 and not diff.predictions.any
    assert diff.verdict == "identical: the same archive bytes"

    result = run_cli("diff", original, copy_dir / original.name, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["identical"] is True
    assert "identical" in result.stderr.splitlines()[-1]


def test_a_rerun_that_only_restamped_the_date_says_so(original: Path, tmp_path: Path) -> None:
    rerun = bundle(tmp_path / "b", RunSpec(rows=5, run_date=LATER))
    diff = diff_bundles(original, rerun)
    assert diff.only_run_date and not diff.identical and diff.exit_code == 1
    assert diff.claims == [
        FieldDifference(field="run_date", a=RunSpec().run_date, b=LATER),
    ]
    assert [file.field for file in diff.files] == ["run_meta.json sha256"]
    assert diff.metrics == [] and not diff.predictions.any

    result = run_cli("diff", original, rerun)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    verdict = result.stderr.strip().splitlines()[-1]
    assert verdict.startswith("only run_date differs"), result.stderr
    assert LATER in verdict


def test_claims_metrics_and_predictions_differences(original: Path, tmp_path: Path) -> None:
    changed = RunSpec(
        rows=7,
        seed=99,  # different thoughts, so every shared prediction's sha256 differs
        git_sha="fedcba9876543210fedcba9876543210fedcba98",
        metrics={
            "exact_match": {"accuracy": 0.7, "n": 7},
            "expert-vqa_scorer": {"score": "n/a", "per_module": {"wires": 0.9}},
            "new_scorer": {"f1": 0.5},
        },
    )
    options = CollectOptions(submitter=Submitter(name="Ada", contact="ada@example.org"))
    other = bundle(tmp_path / "b", changed, options)
    diff = diff_bundles(original, other)
    assert not diff.identical and not diff.only_run_date and diff.exit_code == 1

    claims = {claim.field: (claim.a, claim.b) for claim in diff.claims}
    assert claims["provenance.git_sha"] == (RunSpec().git_sha, changed.git_sha)
    assert claims["submitter.name"] == (None, "Ada")
    assert claims["submitter.contact"] == (None, "ada@example.org")
    assert claims["predictions.count"] == (5, 7)
    assert claims["coverage.rows_present"] == (5, 7)
    assert "run_date" not in claims and "bundle_id" not in claims
    # usage sums differ per key, each shown as its own field
    assert "predictions.usage.input_tokens" in claims

    metrics = {metric.name: metric for metric in diff.metrics}
    accuracy = metrics["exact_match.accuracy"]
    assert (accuracy.change, accuracy.a, accuracy.b) == ("changed", 0.62, 0.7)
    assert accuracy.delta == pytest.approx(0.08)
    assert metrics["exact_match.n"].delta == 2
    score = metrics["expert-vqa_scorer.score"]
    assert (score.a, score.b, score.delta) == (41.5, "n/a", None)
    removed = metrics["expert-vqa_scorer.per_module.maze"]
    assert (removed.change, removed.a, removed.b) == ("removed", 0.3, None)
    assert metrics["new_scorer.f1"].change == "added"
    assert "expert-vqa_scorer.per_module.wires" not in metrics  # same value on both sides

    predictions = diff.predictions
    assert (predictions.added, predictions.removed, predictions.changed) == (2, 0, 5)
    assert predictions.first_added == [5, 6] and predictions.first_changed == [0, 1, 2, 3, 4]
    assert diff.samples == []
    assert diff.verdict.startswith("different: ")
    assert "predictions 2 added, 0 removed, 5 changed" in diff.verdict

    reverse = diff_bundles(other, original)
    assert (reverse.predictions.removed, reverse.predictions.first_removed) == (2, [5, 6])
    assert {metric.name: metric.change for metric in reverse.metrics}["new_scorer.f1"] == "removed"


def test_first_changed_predictions_side_by_side(original: Path, tmp_path: Path) -> None:
    other = bundle(tmp_path / "b", RunSpec(rows=5, scored_output=False, seed=3))
    diff = diff_bundles(original, other, predictions=2)
    # B's harness wrote no scored_output, so both sides show `output`
    assert [(s.index, s.field, s.a, s.b) for s in diff.samples] == [
        (0, "output", "answer 0", "answer 0"),
        (1, "output", "answer 1", "answer 1"),
    ]
    both_scored = bundle(tmp_path / "c", RunSpec(rows=5, seed=3))
    samples = diff_bundles(original, both_scored, predictions=50).samples
    assert [(s.index, s.field, s.a) for s in samples] == [
        (index, "scored_output", f"ANSWER {index}") for index in range(5)
    ]

    result = run_cli("diff", original, both_scored, "--predictions", "1", "--json")
    assert result.returncode == 1, result.stderr
    report = BundleDiff.model_validate_json(result.stdout)
    assert [sample.index for sample in report.samples] == [0]
    assert "changed predictions" in result.stderr and "ANSWER 0" in result.stderr


def test_only_the_named_members_are_read(original: Path) -> None:
    members = {member.name: member.data for member in read_members(original)}
    wanted = {"predictions/prediction_3.json", "predictions/prediction_1.json"}
    read = list(read_archive_members(original, wanted))
    assert [name for name, _ in read] == sorted(wanted)  # archive order: 1 before 3
    assert all(data == members[name] for name, data in read)
    with pytest.raises(UsageError, match=r"prediction_9\.json is missing"):
        list(read_archive_members(original, {"predictions/prediction_9.json"}))


def test_claim_differences_field_by_field(original: Path) -> None:
    reading = read_bundle(original)
    assert reading.claim is not None
    claim = reading.claim
    statics = claim.statics.model_copy(update={"resolved_revision": None})
    other = claim.model_copy(
        update={"statics": statics, "warnings": [*claim.warnings, "new warning"]}
    )
    differences = claim_differences(claim, other)
    fields = [difference.field for difference in differences]
    assert fields == [
        "statics.resolved_revision",
        "statics.is_pinned",
        "statics.revision_label",
        "warnings",
    ]
    assert differences[1] == FieldDifference(field="statics.is_pinned", a=True, b=False)
    assert claim_differences(claim, claim) == []


def test_an_unverifiable_bundle_is_unusable(original: Path, tmp_path: Path) -> None:
    tampered_dir = tmp_path / "tampered"
    shutil.copytree(original.parent, tampered_dir / original.parent.name)
    tampered = tampered_dir / original.parent.name / original.name

    def change_a_prediction(members: list) -> list:  # type: ignore[type-arg]
        members[3].data = members[3].data.replace(b"answer", b"ANSWER")
        return members

    forge(tampered, change_a_prediction)
    with pytest.raises(UsageError, match="fails verification: contents"):
        diff_bundles(original, tampered)

    result = run_cli("diff", original, tampered, "--json")
    assert result.returncode == 2
    line = one_line_error(result.stderr)
    assert str(tampered) in line and "unusable bundle" in line and "sha256 differs" in line
    assert json.loads(result.stdout)["exit_code"] == 2

    missing = run_cli("diff", original, tmp_path / "nowhere.tar.zst")
    assert missing.returncode == 2
    assert "no such bundle archive" in one_line_error(missing.stderr)


def test_control_characters_from_a_bundle_are_shown_escaped(original: Path, tmp_path: Path) -> None:
    hostile = Submitter(name="Mallory\x1b[2J\x1b]0;owned\x07", contact="m@x\u202egro")
    other = bundle(tmp_path / "b", RunSpec(rows=5), CollectOptions(submitter=hostile))
    result = run_cli("diff", original, other)
    assert result.returncode == 1, result.stderr
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "Mallory\\x1b[2J\\x1b]0;owned\\x07" in result.stderr
    assert "m@x\\u202egro" in result.stderr
    assert "submitter.name" in result.stderr


def test_run_meta_fields_no_claim_carries_are_shown(tmp_path: Path) -> None:
    def settings(temperature: float, subset: str) -> Callable[[dict[str, Any]], None]:
        def change(run_meta: dict[str, Any]) -> None:
            run_meta["temperature"] = temperature
            run_meta["statics"]["subset"] = subset

        return change

    rerun = RunSpec(rows=5, run_date=LATER)
    easy = bundle_with_run_meta(tmp_path / "easy", RunSpec(rows=5), settings(0.0, "easy"))
    hard = bundle_with_run_meta(tmp_path / "hard", rerun, settings(1.0, "hard"))
    diff = diff_bundles(easy, hard)
    assert not diff.only_run_date and diff.exit_code == 1
    assert diff.claims == [
        FieldDifference(field="run_date", a=RunSpec().run_date, b=LATER),
        FieldDifference(field="run_meta.statics.subset", a="easy", b="hard"),
        FieldDifference(field="run_meta.temperature", a=0.0, b=1.0),
    ]
    assert diff.verdict.startswith("different: 3 claim field(s)"), diff.verdict

    result = run_cli("diff", easy, hard)
    assert result.returncode == 1, result.stderr
    assert "run_meta.temperature" in result.stderr and "run_meta.statics.subset" in result.stderr
    assert "only run_date" not in result.stderr

    # the same extra fields on both sides are no difference: a re-stamp stays a re-stamp
    easy_again = bundle_with_run_meta(tmp_path / "again", rerun, settings(0.0, "easy"))
    assert diff_bundles(easy, easy_again).only_run_date


def test_json_output_holds_no_nan_or_infinity(tmp_path: Path) -> None:
    low = bundle(
        tmp_path / "a",
        RunSpec(rows=5, metrics={"s": {"v": -1.7e308}}, extra_capabilities={"t": math.nan}),
    )
    high = bundle(
        tmp_path / "b",
        RunSpec(rows=5, metrics={"s": {"v": 1.7e308}}, extra_capabilities={"t": math.inf}),
    )
    diff = diff_bundles(low, high)
    assert diff.metrics == [
        MetricDifference(name="s.v", change="changed", a=-1.7e308, b=1.7e308, delta=None)
    ]

    result = run_cli("diff", low, high, "--json")
    assert result.returncode == 1, result.stderr
    report = strict_json(result.stdout)
    assert report["metrics"][0]["delta"] is None
    # shown as `inspect --json` shows such a capability: null
    assert {"field": "capabilities.t", "a": None, "b": None} in report["claims"]
    assert strict_json(run_cli("inspect", low, "--json").stdout)["capabilities"]["t"] is None

    shown = run_cli("diff", low, high).stderr
    assert "NaN" in shown and "Infinity" in shown  # a person still sees the values


def test_a_bundle_with_a_nan_capability_is_identical_to_itself(tmp_path: Path) -> None:
    nan = bundle(tmp_path, RunSpec(rows=5, extra_capabilities={"t": math.nan}))
    diff = diff_bundles(nan, nan)
    assert diff.identical and diff.claims == [] and diff.exit_code == 0
    assert run_cli("diff", nan, nan).returncode == 0


def test_values_compare_as_their_json(original: Path) -> None:
    """As the capability fingerprint sees them: 1, 1.0 and true differ, inside a list too."""
    reading = read_bundle(original)
    assert reading.claim is not None
    claim = reading.claim

    def with_provenance(value: object) -> Any:
        return claim.model_copy(update={"provenance": {**claim.provenance, "x": value}})

    for a, b in ((1, 1.0), (1, True), (None, 0), ([1], [1.0]), ([0], [False])):
        assert claim_differences(with_provenance(a), with_provenance(b)) == [
            FieldDifference(field="provenance.x", a=a, b=b)
        ]
    assert claim_differences(with_provenance([1, "1"]), with_provenance([1, "1"])) == []


def test_metrics_whose_names_collide_are_told_apart(tmp_path: Path) -> None:
    first = bundle(tmp_path / "a", RunSpec(rows=5, metrics={"s": {"a.b": 1, "a": {"b": 2}}}))
    second = bundle(tmp_path / "b", RunSpec(rows=5, metrics={"s": {"a.b": 5, "a": {"b": 2}}}))
    assert diff_bundles(first, second).metrics == [
        MetricDifference(name='s."a.b"', change="changed", a=1, b=5, delta=4)
    ]
    # names shared across the two sides only are told apart too
    assert metric_differences({"s": {"a.b": 1}}, {"s": {"a": {"b": 1}}}) == [
        MetricDifference(name='s."a.b"', change="removed", a=1),
        MetricDifference(name="s.a.b", change="added", b=1),
    ]
    assert [m.name for m in metric_differences({}, {"": {}})] == ["", '""']


def test_a_folder_or_a_fifo_is_no_bundle_archive(original: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder.tar.zst"
    folder.mkdir()
    fifo = tmp_path / "pipe.tar.zst"
    os.mkfifo(fifo)
    for path, problem in ((folder, "bundle but a folder"), (fifo, "bundle")):
        result = run_cli("diff", original, path)
        assert result.returncode == 2
        assert one_line_error(result.stderr).endswith(f"{path}: not a .tar.zst {problem}")
