"""Reading and validating one run directory: header, predictions, counts, coverage, refusals."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import pytest
from factory import RunSpec, write_run

from bundler.cli.error_words import words_for
from bundler.core.errors import InputError
from bundler.core.limits import INT64_MAX
from bundler.core.naming import capability_fingerprint
from bundler.local.discover import discover
from bundler.local.runs import RunHeader, ValidatedRun, read_header, validate_run


def header_of(root: Path) -> RunHeader:
    (run,) = discover(root).runs
    return read_header(run)


def validated(
    tmp_path: Path, spec: RunSpec, expected: int | None = None, allow_partial: bool = False
) -> ValidatedRun:
    write_run(tmp_path, spec)
    return validate_run(header_of(tmp_path), expected_rows=expected, allow_partial=allow_partial)


def expected_counts(spec: RunSpec) -> tuple[int, int, dict[str, int]]:
    """Errors, exceptions and summed usage, recomputed from the files the factory wrote."""
    errors = exceptions = 0
    usage: dict[str, int] = {}
    rng = random.Random(spec.seed)
    for index in spec.written_indices():
        record = spec.prediction(index, rng)
        errors += record["error"] is not None
        exceptions += record["exception"] is not None
        for key, value in record["usage"].items():
            usage[key] = usage.get(key, 0) + value
    return errors, exceptions, usage


def test_header_names_the_bundle(tmp_path: Path) -> None:
    spec = RunSpec(model="Qwen/Qwen3.5-27B", rows=1)
    run_dir = write_run(tmp_path, spec)
    header = header_of(tmp_path)
    fingerprint = capability_fingerprint(spec.run_meta()["capabilities"])
    assert header.fingerprint == fingerprint
    assert str(header.bundle_id) == f"qwen-qwen3-5-27b_{fingerprint[:8]}/expert-vqa@a1b2c3d4"
    meta_bytes = (run_dir / "run_meta.json").read_bytes()
    assert header.run_meta_file.sha256 == hashlib.sha256(meta_bytes).hexdigest()
    assert header.run_meta_file.size == len(meta_bytes)


def test_counts_and_usage_are_summed(tmp_path: Path) -> None:
    spec = RunSpec(rows=23)
    run = validated(tmp_path, spec, expected=23)
    errors, exceptions, usage = expected_counts(spec)
    assert (errors, exceptions) == (3, 2)  # rows 3, 10, 17 fail; rows 5, 16 raise
    summary = run.summary
    assert summary.count == 23 and summary.contiguous
    assert (summary.errors, summary.exceptions, summary.usage) == (errors, exceptions, usage)
    assert list(summary.usage) == sorted(usage)
    assert summary.missing_scored_output == 0
    assert run.coverage.model_dump() == {
        "status": "complete",
        "expected_rows": 23,
        "rows_present": 23,
    }
    assert "2 prediction(s) did not complete (exception)" in run.warnings
    # 2 of 23 is above what review accepts by default: the run's bundle is warned, with the rate
    (above,) = [warning for warning in run.warnings if warning.startswith("exception rate")]
    assert "8.7% (2 of 23 predictions)" in above and "above the 5.0% review accepts" in above
    run = validated(tmp_path / "none", RunSpec(rows=3), expected=3)  # none raised
    assert not [warning for warning in run.warnings if warning.startswith("exception rate")]


def test_predictions_are_in_numeric_order(tmp_path: Path) -> None:
    run = validated(tmp_path, RunSpec(rows=12), expected=12)
    paths = [file.archive_path for file in run.files()]
    assert paths[:2] == ["run_meta.json", "metrics.json"]
    assert paths[2:] == [f"predictions/prediction_{i}.json" for i in range(12)]
    assert paths.index("predictions/prediction_2.json") < paths.index(
        "predictions/prediction_10.json"
    )
    for file in run.files():
        name = file.archive_path.removeprefix("predictions/")
        data = (run.header.run.path / name).read_bytes()
        assert (file.size, file.sha256) == (len(data), hashlib.sha256(data).hexdigest())


def test_coverage_without_expect_is_unknown_with_a_warning(tmp_path: Path) -> None:
    run = validated(tmp_path, RunSpec(rows=4))
    assert run.coverage.status == "unknown"
    assert run.coverage.expected_rows is None
    assert any("coverage unknown: 4 rows present" in warning for warning in run.warnings)


def test_limited_run_is_refused_as_partial(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"partial run: 3 of 10 rows") as caught:
        validated(tmp_path, RunSpec(rows=3), expected=10)
    assert caught.value.remedy == "bundle-partial"  # the command line words it as its flag
    assert "--allow-partial" in (words_for(caught.value)[1] or "")


def test_limited_run_with_allow_partial_is_recorded_partial_never_complete(tmp_path: Path) -> None:
    run = validated(tmp_path, RunSpec(rows=3), expected=10, allow_partial=True)
    assert run.coverage.status == "partial"
    assert run.coverage.rows_present == 3
    assert any("partial run: 3 of 10" in warning for warning in run.warnings)


def test_gapped_run_is_refused_even_without_expect(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"gaps \(missing 2, 5-6\)"):
        validated(tmp_path, RunSpec(indices=[0, 1, 3, 4, 7]))


def test_gapped_run_with_allow_partial_is_partial(tmp_path: Path) -> None:
    run = validated(tmp_path, RunSpec(indices=[0, 2]), expected=3, allow_partial=True)
    assert run.coverage.status == "partial"
    assert not run.summary.contiguous


def test_run_not_starting_at_zero_is_gapped(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing 0"):
        validated(tmp_path, RunSpec(indices=[1, 2]), expected=3)


def test_index_beyond_expected_rows_is_refused_even_with_allow_partial(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="index 5 is beyond the 5 rows"):
        validated(tmp_path, RunSpec(rows=6), expected=5, allow_partial=True)


def test_missing_scored_output_is_a_warning(tmp_path: Path) -> None:
    run = validated(tmp_path, RunSpec(rows=3, scored_output=False), expected=3)
    assert run.summary.missing_scored_output == 3
    assert "3 prediction(s) lack scored_output (older harness)" in run.warnings


def test_claim_warnings_for_unpinned_dirty_and_unknown_version(tmp_path: Path) -> None:
    spec = RunSpec(rows=1, resolved_revision=None, git_sha="abc-dirty", gptnt_version="0.0.0")
    run = validated(tmp_path, spec, expected=1)
    assert run.header.meta.statics.target == "expert-vqa@unpinned"
    joined = " | ".join(run.warnings)
    assert "dataset revision unpinned" in joined
    assert "harness tree was dirty (abc-dirty)" in joined
    assert "harness version unknown" in joined


def test_unknown_files_are_left_out_and_listed(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=2))
    for name in ("notes.md", ".DS_Store", "predictions.csv"):
        (run_dir / name).write_text("x")
    (run_dir / "scratch").mkdir()
    run = validate_run(header_of(tmp_path), expected_rows=2, allow_partial=False)
    assert (
        "left out 4 unknown file(s): .DS_Store, notes.md, predictions.csv, scratch/" in run.warnings
    )
    assert all("notes" not in file.archive_path for file in run.files())


def test_a_folder_in_a_run_directory_is_left_out_and_listed(tmp_path: Path) -> None:
    """Nothing below a subfolder that holds no run is bundled, so the folder is named among
    what was left out, never dropped without a word."""
    run_dir = write_run(tmp_path, RunSpec(rows=2))
    (run_dir / "logs").mkdir()
    (run_dir / "logs" / "trace.txt").write_text("important")
    (run_dir / "notes.txt").write_text("x")
    run = validate_run(header_of(tmp_path), expected_rows=2, allow_partial=False)
    assert (run.left_out.count, run.left_out.shown) == (2, ["logs/", "notes.txt"])
    assert "left out 2 unknown file(s): logs/, notes.txt" in run.warnings


def test_a_prediction_name_with_a_trailing_newline_is_an_unknown_file(tmp_path: Path) -> None:
    # `$` matches before a trailing newline: "prediction_1.json\n" must not pass for row 1.
    run_dir = write_run(tmp_path, RunSpec(rows=2))
    (run_dir / "prediction_1.json").rename(run_dir / "prediction_1.json\n")
    run = validate_run(header_of(tmp_path), expected_rows=None, allow_partial=False)
    assert [file.archive_path for file in run.predictions] == ["predictions/prediction_0.json"]
    assert (run.left_out.count, run.left_out.shown) == (1, ["prediction_1.json\n"])
    assert "left out 1 unknown file(s): prediction_1.json\n" in run.warnings


def test_many_unknown_files_are_summarised(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    for number in range(13):
        (run_dir / f"extra_{number:02d}.txt").write_text("x")
    run = validate_run(header_of(tmp_path), expected_rows=1, allow_partial=False)
    assert any(
        w.startswith("left out 13 unknown") and w.endswith("and 3 more") for w in run.warnings
    )


# Refusals: each names the file and the problem on one line. --------------------------------


def refusal(tmp_path: Path, expected: int | None = None) -> str:
    with pytest.raises(InputError) as caught:
        validate_run(header_of(tmp_path), expected_rows=expected, allow_partial=False)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_missing_run_meta(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    (run_dir / "run_meta.json").unlink()
    (run,) = discover(tmp_path).runs
    with pytest.raises(InputError) as caught:
        read_header(run)
    assert caught.value.path == str(run_dir / "run_meta.json")
    # The wording statics-outputs.md asks for: a run of the public release that crashed or was
    # interrupted has predictions but no run_meta.json yet, so a newer harness is not the fix.
    assert "unfinished run, or a harness that does not write run_meta.json" in str(caught.value)
    assert caught.value.hint == "finish or resume the run"


@pytest.mark.parametrize("player_name", ["模型-β", "---"])
def test_a_player_name_without_ascii_letters_is_named_by_its_fingerprint(
    tmp_path: Path, player_name: str
) -> None:
    write_run(tmp_path, RunSpec(rows=1, player_name=player_name))
    (run,) = discover(tmp_path).runs
    header = read_header(run)
    assert header.bundle_id.player_dir == f"_{header.fingerprint[:8]}"
    assert header.meta.capabilities.player_name == player_name


def test_missing_metrics(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    (run_dir / "metrics.json").unlink()
    assert refusal(tmp_path).startswith(f"{run_dir / 'metrics.json'}: missing: the run was not")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[1]", "expected a JSON object, found list"),
        (b'{"accuracy": 0.5}', "scorer 'accuracy' maps to float, expected an object"),
        (b'{"x": {}, "y": [1]}', "scorer 'y' maps to list"),
        (b"{oops", "not valid JSON"),
    ],
)
def test_bad_metrics(tmp_path: Path, content: bytes, problem: str) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    (run_dir / "metrics.json").write_bytes(content)
    message = refusal(tmp_path)
    assert message.startswith(str(run_dir / "metrics.json"))
    assert problem in message


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("prediction_1.json", b"not json", "not valid JSON"),
        ("prediction_1.json", b'{"index": 1}', "missing field 'usage'"),
        ("prediction_1.json", None, "index 0 disagrees with the file name's index 1"),
    ],
)
def test_bad_prediction(tmp_path: Path, name: str, content: bytes | None, problem: str) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=3))
    target = run_dir / name
    target.write_bytes(
        content if content is not None else (run_dir / "prediction_0.json").read_bytes()
    )
    message = refusal(tmp_path, expected=3)
    assert message.startswith(f"{target}: ")
    assert problem in message


def test_duplicate_indices(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=3))
    (run_dir / "prediction_01.json").write_bytes((run_dir / "prediction_1.json").read_bytes())
    message = refusal(tmp_path, expected=3)
    assert message == f"{run_dir}: duplicate index 1: prediction_01.json and prediction_1.json"


@pytest.mark.parametrize("name", ["prediction_x.json", "prediction_-1.json", "prediction_.json"])
def test_prediction_file_name_without_a_decimal_index(tmp_path: Path, name: str) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    (run_dir / name).write_text("{}")
    assert refusal(tmp_path) == f"{run_dir / name}: file name is not prediction_<index>.json"


def test_no_predictions(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=0))
    assert refusal(tmp_path) == f"{run_dir}: no prediction_<index>.json files"


def test_fifo_in_place_of_a_prediction_is_refused_without_blocking(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=3))
    (run_dir / "prediction_2.json").unlink()
    os.mkfifo(run_dir / "prediction_2.json")
    assert refusal(tmp_path, expected=3) == f"{run_dir / 'prediction_2.json'}: not a regular file"


def test_directory_named_like_a_prediction_is_refused(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=4))
    (run_dir / "prediction_3.json").unlink()
    (run_dir / "prediction_3.json").mkdir()
    assert refusal(tmp_path, expected=4) == f"{run_dir / 'prediction_3.json'}: not a regular file"


def test_symlinked_prediction_is_refused(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=2))
    outside = tmp_path / "secret.json"
    outside.write_bytes((run_dir / "prediction_1.json").read_bytes())
    (run_dir / "prediction_1.json").unlink()
    (run_dir / "prediction_1.json").symlink_to(outside)
    message = refusal(tmp_path, expected=2)
    assert message == f"{run_dir / 'prediction_1.json'}: symbolic link; links are never followed"


@pytest.mark.parametrize("name", ["run_meta.json", "metrics.json"])
def test_symlinked_meta_or_metrics_is_refused(tmp_path: Path, name: str) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    outside = tmp_path / f"real-{name}"
    (run_dir / name).rename(outside)
    (run_dir / name).symlink_to(outside)
    (run,) = discover(tmp_path).runs
    with pytest.raises(InputError, match="symbolic link; links are never followed") as caught:
        validate_run(read_header(run), expected_rows=None, allow_partial=False)
    assert caught.value.path == str(run_dir / name)


def test_unreadable_prediction_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode; FIFO and directory cases cover this")
    run_dir = write_run(tmp_path, RunSpec(rows=2))
    (run_dir / "prediction_1.json").chmod(0)
    assert "cannot read: Permission denied" in refusal(tmp_path, expected=2)


def test_metrics_copied_bytes_are_hashed_exactly(tmp_path: Path) -> None:
    metrics = b'{ "b": {"x": 1.50}, "a": {"nested": {"deep": [1, 2]}} }\n'
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    (run_dir / "metrics.json").write_bytes(metrics)
    run = validate_run(header_of(tmp_path), expected_rows=1, allow_partial=False)
    assert run.metrics_file.sha256 == hashlib.sha256(metrics).hexdigest()
    assert run.metrics_file.size == len(metrics)
    assert json.loads(metrics)  # sanity: the odd formatting is still valid JSON


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("prediction_\u0663.json", "file name is not prediction_<index>.json"),
        ("prediction_\uff13.json", "file name is not prediction_<index>.json"),
        (
            f"prediction_{INT64_MAX + 1}.json",
            f"index {INT64_MAX + 1} is larger than any row index can be",
        ),
    ],
)
def test_a_name_that_only_looks_like_a_prediction_s_is_judged_by_the_full_rules(
    tmp_path: Path, name: str, problem: str
) -> None:
    """Names are listed quickly when they are canonical; digits that are not ASCII, and
    indices too long to be sure of, take the careful way and are refused as before."""
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    (run_dir / name).write_text("{}")
    assert refusal(tmp_path) == f"{run_dir / name}: {problem}"


def test_indices_up_to_int64_max_are_listed_in_order(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunSpec(rows=1))
    record = json.loads((run_dir / "prediction_0.json").read_bytes())
    large = [10**18 - 1, 10**18, INT64_MAX]
    for index in large:
        (run_dir / f"prediction_{index}.json").write_text(json.dumps(record | {"index": index}))
    run = validate_run(header_of(tmp_path), expected_rows=None, allow_partial=True)
    assert list(run.predictions.indices) == [0, *large]
    assert [file.archive_path for file in run.predictions] == [
        f"predictions/prediction_{index}.json" for index in [0, *large]
    ]
