"""The collect pipeline as a library: filters, collisions, refusals, atomicity, re-runs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from factory import DEFAULT_SHA, RunSpec, write_run, write_tree
from helpers import (
    all_files,
    one_line_error,
    only_bundle,
    partial_files,
    read_manifest,
    read_members,
    run_cli,
    strict_json,
)

from bundler.cli.options import parse_expectations
from bundler.core.errors import NoRunSelectedError, UsageError
from bundler.hub.tasks.split_size import split_rows
from bundler.local.collect import CollectOptions, CollectReport, collect
from bundler.local.discover import Discovery, discover
from bundler.local.layout import TEMP_PREFIX, TEMP_SUFFIX
from bundler.local.submitter import Submitter
from bundler.local.verify import verify

GOOD = RunSpec(model="gpt-5.2", rows=4)
BAD = RunSpec(model="broken-model", rows=4)


def run_collect(root: Path, bundles: Path, **options: object) -> CollectReport:
    return collect(root, bundles, CollectOptions.model_validate(options))


def test_collects_every_run_and_reports_how_do_you(tmp_path: Path) -> None:
    write_tree(
        tmp_path / "out",
        [GOOD, RunSpec(model="Qwen/Qwen3.5-27B", rows=4, resolved_revision=None)],
    )
    report = run_collect(tmp_path / "out", tmp_path / "b", expected_rows={"expert-vqa": 4})
    assert report.refused == [] and report.exit_code == 0
    ids = sorted(bundle.bundle_id for bundle in report.bundles)
    assert [bid.split("_")[0] for bid in ids] == ["gpt-5-2", "qwen-qwen3-5-27b"]
    assert ids[1].endswith("/expert-vqa@unpinned")
    assert {bundle.coverage for bundle in report.bundles} == {"complete"}
    assert [(Path(item.path).name, item.reason) for item in report.skipped] == [
        ("how_do_you", "not a dataset-backed target")
    ]
    assert len(all_files(tmp_path / "b")) == 4


def test_partial_run_is_refused_but_the_others_are_written(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [GOOD, RunSpec(model="limited", rows=2)])
    report = run_collect(tmp_path / "out", tmp_path / "b", expected_rows={"expert-vqa": 4})
    assert [bundle.bundle_id.split("_")[0] for bundle in report.bundles] == ["gpt-5-2"]
    (refusal,) = report.refused
    assert refusal.path.endswith("expert-vqa_predictions/limited")
    assert "partial run: 2 of 4 rows" in refusal.error
    assert report.exit_code == 1
    assert not any("limited" in str(path) for path in all_files(tmp_path / "b"))


def test_allow_partial_records_partial(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [RunSpec(rows=2)])
    report = run_collect(
        tmp_path / "out", tmp_path / "b", expected_rows={"expert-vqa": 4}, allow_partial=True
    )
    bundle = only_bundle(report)
    assert bundle.coverage == "partial"
    assert read_manifest(Path(bundle.archive))["coverage"]["status"] == "partial"


def test_without_expect_coverage_is_unknown_never_complete(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [RunSpec(rows=3)])
    bundle = only_bundle(run_collect(tmp_path / "out", tmp_path / "b"))
    assert bundle.coverage == "unknown"
    assert read_manifest(Path(bundle.archive))["coverage"] == {
        "status": "unknown",
        "expected_rows": None,
        "rows_present": 3,
    }


def test_task_and_model_filters(tmp_path: Path) -> None:
    write_tree(
        tmp_path / "out",
        [
            RunSpec(model="gpt-5.2", rows=1),
            RunSpec(model="openrouter/qwen", player_name="qwen-player", rows=1),
            RunSpec(task="maze", model="gpt-5.2", rows=1),
        ],
    )
    root = tmp_path / "out"

    def ids(**options: object) -> list[str]:
        report = run_collect(root, tmp_path / f"b{len(options)}", **options)
        return sorted(
            bundle.bundle_id.split("_")[0] + ":" + bundle.bundle_id.split("/")[-1]
            for bundle in report.bundles
        )

    assert ids(tasks=["maze"]) == ["gpt-5-2:maze@a1b2c3d4"]
    assert ids(models=["qwen-player"]) == ["qwen-player:expert-vqa@a1b2c3d4"]
    assert ids(models=["openrouter/qwen"]) == ["qwen-player:expert-vqa@a1b2c3d4"]
    assert ids(tasks=["expert-vqa"], models=["gpt-5.2"]) == ["gpt-5-2:expert-vqa@a1b2c3d4"]
    report = run_collect(root, tmp_path / "bf", tasks=["maze"])
    reasons = {Path(item.path).name: item.reason for item in report.skipped}
    assert reasons["gpt-5.2"] == "not selected by filters"
    assert reasons["how_do_you"] == "not a dataset-backed target"


def test_filters_still_report_broken_runs_they_would_have_taken(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(model="Qwen/Qwen3.5-27B", rows=1), RunSpec(model="other", rows=1)])
    for run in ("Qwen/Qwen3.5-27B", "other"):
        (root / "expert-vqa_predictions" / run / "run_meta.json").write_text("{")
    report = run_collect(root, tmp_path / "b", models=["Qwen/Qwen3.5-27B"])
    assert [Path(item.path).name for item in report.refused] == ["Qwen3.5-27B"]
    assert "run_meta.json: not valid JSON" in report.refused[0].error


def test_submitter_is_recorded(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [GOOD])
    submitter = Submitter(name="Ada", contact="ada@example.org", affiliation="Lab")
    bundle = only_bundle(run_collect(tmp_path / "out", tmp_path / "b", submitter=submitter))
    assert read_manifest(Path(bundle.archive))["submitter"] == submitter.model_dump()
    sidecar = json.loads(Path(bundle.sidecar).read_text())
    assert sidecar["submitter"] == submitter.model_dump()


@pytest.mark.parametrize("given_by", ["option", "environment"])
def test_a_submitter_that_is_not_utf8_is_a_usage_error(tmp_path: Path, given_by: str) -> None:
    """A byte that is not UTF-8 (os keeps it as a lone surrogate) could never be written into
    the claim's JSON: one usage line naming where it came from, not an internal error."""
    write_tree(tmp_path / "out", [GOOD])
    name = "Ada \udcff"  # the byte 0xff, as os decodes the command line and the environment
    given = ["--submitter-name", name] if given_by == "option" else []
    environment = {"BUNDLER_SUBMITTER_NAME": name} if given_by == "environment" else {}
    for json_flag in ([], ["--json"]):
        result = run_cli(
            "collect", tmp_path / "out", "-o", tmp_path / "b", *given, *json_flag, env=environment
        )
        assert result.returncode == 2, result.stderr
        line = one_line_error(result.stderr)
        assert "--submitter-name" in line and "BUNDLER_SUBMITTER_NAME" in line, line
        assert "internal error" not in line
    assert json.loads(result.stdout)["exit_code"] == 2
    assert not (tmp_path / "b").exists()


def test_two_runs_for_one_bundle_id_are_both_refused(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [GOOD, RunSpec(model="gpt-5.2", directory="copy/gpt-5.2", rows=4)])
    report = run_collect(root, tmp_path / "b")
    assert report.bundles == []
    assert len(report.refused) == 2
    first, second = (str(root / "expert-vqa_predictions" / d) for d in ("copy/gpt-5.2", "gpt-5.2"))
    for refusal in report.refused:
        assert first in refusal.error and second in refusal.error
        assert "same bundle gpt-5-2_" in refusal.error
    assert all_files(tmp_path / "b") == []


def test_tags_sharing_a_prefix_resolving_to_different_shas_get_different_targets(
    tmp_path: Path,
) -> None:
    root = tmp_path / "out"
    write_tree(
        root,
        [
            RunSpec(
                model="m",
                directory="m-v1",
                requested_revision="v1",
                rows=1,
                resolved_revision="1111111100000000000000000000000000000000",
            ),
            RunSpec(
                model="m",
                directory="m-v1.1",
                requested_revision="v1.1",
                rows=1,
                resolved_revision="2222222200000000000000000000000000000000",
            ),
        ],
    )
    report = run_collect(root, tmp_path / "b")
    assert sorted(bundle.bundle_id.split("/")[1] for bundle in report.bundles) == [
        "expert-vqa@11111111",
        "expert-vqa@22222222",
    ]
    assert len({Path(bundle.archive) for bundle in report.bundles}) == 2


def test_shas_sharing_the_first_8_characters_collide_and_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(
        root,
        [
            RunSpec(model="m", directory="a", rows=1, resolved_revision="12345678" + "a" * 32),
            RunSpec(model="m", directory="b", rows=1, resolved_revision="12345678" + "b" * 32),
        ],
    )
    report = run_collect(root, tmp_path / "b")
    assert report.bundles == [] and len(report.refused) == 2


def test_unsafe_task_name_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [GOOD])
    run_dir = write_run(root, RunSpec(model="evil", rows=1))
    meta = json.loads((run_dir / "run_meta.json").read_text())
    meta["statics"]["task_name"] = "../../escape"
    (run_dir / "run_meta.json").write_text(json.dumps(meta))
    report = run_collect(root, tmp_path / "b")
    assert len(report.bundles) == 1
    (refusal,) = report.refused
    assert refusal.error.startswith(f"{run_dir / 'run_meta.json'}: statics.task_name:")
    assert "not safe in a path" in refusal.error
    assert not (tmp_path / "escape").exists()


def _rewrite(name: str, content: bytes) -> Callable[[Path], Path]:
    def fault(run_dir: Path) -> Path:
        (run_dir / name).write_bytes(content)
        return run_dir / name

    return fault


def _remove(name: str) -> Callable[[Path], Path]:
    def fault(run_dir: Path) -> Path:
        (run_dir / name).unlink()
        return run_dir / name

    return fault


def _meta_change(key: str, value: object) -> Callable[[Path], Path]:
    def fault(run_dir: Path) -> Path:
        meta = json.loads((run_dir / "run_meta.json").read_text())
        meta[key] = value
        (run_dir / "run_meta.json").write_text(json.dumps(meta))
        return run_dir / "run_meta.json"

    return fault


RAW = "__raw_json__"
"""Stands in for a value in json.dumps output, then is replaced by raw JSON text, so a test
can write what Python's encoder would refuse to (nesting beyond its recursion limit)."""


def _meta_raw(raw: str, *keys: str) -> Callable[[Path], Path]:
    """run_meta.json with the value at `keys` replaced by the JSON text `raw`."""

    def fault(run_dir: Path) -> Path:
        meta = json.loads((run_dir / "run_meta.json").read_text())
        parent = meta
        for key in keys[:-1]:
            parent = parent[key]
        parent[keys[-1]] = RAW
        (run_dir / "run_meta.json").write_text(json.dumps(meta).replace(f'"{RAW}"', raw))
        return run_dir / "run_meta.json"

    return fault


def _prediction_raw(
    raw: str, *keys: str, name: str = "prediction_1.json"
) -> Callable[[Path], Path]:
    """A prediction with the value at `keys` replaced by the JSON text `raw`."""

    def fault(run_dir: Path) -> Path:
        record = json.loads((run_dir / name).read_text())
        parent = record
        for key in keys[:-1]:
            parent = parent[key]
        parent[keys[-1]] = RAW
        (run_dir / name).write_text(json.dumps(record).replace(f'"{RAW}"', raw))
        return run_dir / name

    return fault


def _bom(name: str) -> Callable[[Path], Path]:
    def fault(run_dir: Path) -> Path:
        (run_dir / name).write_bytes(b"\xef\xbb\xbf" + (run_dir / name).read_bytes())
        return run_dir / name

    return fault


def _utf16(name: str) -> Callable[[Path], Path]:
    def fault(run_dir: Path) -> Path:
        (run_dir / name).write_bytes((run_dir / name).read_text().encode("utf-16"))
        return run_dir / name

    return fault


def _huge_index(run_dir: Path) -> Path:
    (run_dir / "prediction_3.json").rename(run_dir / "prediction_99999999999999999999.json")
    return run_dir / "prediction_99999999999999999999.json"


def _usage_total_overflows(run_dir: Path) -> Path:
    for index in (0, 1):
        _prediction_raw(str(2**63 - 1), "usage", "input_tokens", name=f"prediction_{index}.json")(
            run_dir
        )
    return run_dir / "prediction_1.json"


def _duplicate(run_dir: Path) -> Path:
    (run_dir / "prediction_01.json").write_bytes((run_dir / "prediction_1.json").read_bytes())
    return run_dir


def _symlink(run_dir: Path) -> Path:
    target = run_dir.parent / "elsewhere.json"
    (run_dir / "prediction_2.json").rename(target)
    (run_dir / "prediction_2.json").symlink_to(target)
    return run_dir / "prediction_2.json"


def _fifo(run_dir: Path) -> Path:
    (run_dir / "prediction_3.json").unlink()
    os.mkfifo(run_dir / "prediction_3.json")
    return run_dir / "prediction_3.json"


def _directory(run_dir: Path) -> Path:
    (run_dir / "prediction_3.json").unlink()
    (run_dir / "prediction_3.json").mkdir()
    return run_dir / "prediction_3.json"


def _index_mismatch(run_dir: Path) -> Path:
    (run_dir / "prediction_2.json").write_bytes((run_dir / "prediction_0.json").read_bytes())
    return run_dir / "prediction_2.json"


def _gap(run_dir: Path) -> Path:
    (run_dir / "prediction_1.json").unlink()
    return run_dir


BAD_INPUTS = {
    "missing run_meta": (
        _remove("run_meta.json"),
        "unfinished run, or a harness that does not write run_meta.json (finish or resume",
    ),
    "run_meta bad JSON": (_rewrite("run_meta.json", b'{"model_name": '), "not valid JSON"),
    "run_meta missing field": (_meta_change("provenance", None), "provenance"),
    "run_meta wrong type": (_meta_change("model_name", 42), "model_name: Input should be"),
    "run_date without offset": (_meta_change("run_date", "2026-06-15T10:42:22"), "no UTC offset"),
    "missing metrics": (_remove("metrics.json"), "missing: the run was not scored"),
    "metrics not object": (_rewrite("metrics.json", b"[]"), "expected a JSON object"),
    "metrics values not objects": (_rewrite("metrics.json", b'{"acc": 1}'), "maps to int"),
    "prediction not JSON": (_rewrite("prediction_1.json", b"\x00garbage"), "not valid JSON"),
    "prediction lacks keys": (_rewrite("prediction_1.json", b'{"index": 1}'), "missing field"),
    "prediction index disagrees": (_index_mismatch, "index 0 disagrees with the file name's"),
    "duplicate indices": (_duplicate, "duplicate index 1: prediction_01.json and prediction_1"),
    "gapped indices": (_gap, "gaps (missing 1)"),
    "symlink": (_symlink, "symbolic link; links are never followed"),
    "fifo": (_fifo, "not a regular file"),
    "directory as a prediction": (_directory, "not a regular file"),
    # Untrusted input must never stop the whole collect (issue 6): recursion, integers the
    # schema cannot hold, lone surrogates, huge indices, encodings, int64 usage counts.
    "run_meta nested 1000 deep": (_meta_raw("[" * 1000 + "]" * 1000, "x"), "nested too deeply"),
    "provenance nested 1000 deep": (
        _meta_raw("[" * 1000 + "]" * 1000, "provenance", "x"),
        "nested too deeply",
    ),
    "run_meta 5000-digit integer": (_meta_raw("9" * 5000, "x"), "integer of more than 4300"),
    "surrogate in model_name": (_meta_change("model_name", "\ud800"), "lone surrogate"),
    "surrogate in provenance": (_meta_raw('"\\ud800x"', "provenance", "note"), "lone surrogate"),
    "surrogate key in capabilities": (
        _meta_raw('{"\\udc00": 1}', "capabilities", "x"),
        "lone surrogate",
    ),
    "run_meta with a BOM": (_bom("run_meta.json"), "starts with a UTF-8 byte order mark"),
    "run_meta in UTF-16": (_utf16("run_meta.json"), "not UTF-8 text"),
    "run_date before 1970": (
        _meta_change("run_date", "1960-01-01T00:00:00Z"),
        "not between 1970 and 2242",
    ),
    "run_date beyond a tar header": (
        _meta_change("run_date", "2300-01-01T00:00:00Z"),
        "not between 1970 and 2242",
    ),
    "provenance NaN": (_meta_raw("NaN", "provenance", "x"), "provenance.x is nan"),
    "provenance Infinity deep down": (
        _meta_raw('{"y": [1, Infinity]}', "provenance", "x"),
        "provenance.x.y[1] is inf",
    ),
    "metrics nested 1000 deep": (
        _rewrite("metrics.json", b'{"s": {"x": ' + b"[" * 1000 + b"]" * 1000 + b"}}"),
        "nested too deeply",
    ),
    "metrics 5000-digit integer": (
        _rewrite("metrics.json", b'{"s": {"x": ' + b"9" * 5000 + b"}}"),
        "integer of more than 4300",
    ),
    "metrics surrogate key": (_rewrite("metrics.json", b'{"s": {"\\ud800": 1}}'), "surrogate"),
    "metrics with a BOM": (_bom("metrics.json"), "starts with a UTF-8 byte order mark"),
    "metrics in UTF-16": (_utf16("metrics.json"), "not UTF-8 text"),
    "metrics in Latin-1": (_rewrite("metrics.json", b'{"s": {"caf\xe9": 1}}'), "not UTF-8 text"),
    "prediction nested 1000 deep": (
        _prediction_raw("[" * 1000 + "]" * 1000, "exception"),
        "nested too deeply",
    ),
    "prediction 5000-digit integer": (
        _prediction_raw("9" * 5000, "exception"),
        "integer of more than 4300",
    ),
    "prediction surrogate": (_prediction_raw('"\\ud800"', "model"), "lone surrogate"),
    "prediction with a BOM": (_bom("prediction_1.json"), "starts with a UTF-8 byte order mark"),
    "prediction in UTF-16": (_utf16("prediction_1.json"), "not UTF-8 text"),
    "prediction index beyond int64": (_huge_index, "larger than any row index can be"),
    "usage count 10^30": (
        _prediction_raw(str(10**30), "usage", "input_tokens"),
        "usage.input_tokens: Input should be less than or equal to 9223372036854775807",
    ),
    "usage count negative": (
        _prediction_raw("-5", "usage", "input_tokens"),
        "usage.input_tokens: Input should be greater than or equal to 0",
    ),
    "usage total beyond int64": (_usage_total_overflows, "'input_tokens' adds up to more than"),
}


@pytest.mark.parametrize("fault", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_a_bad_run_is_refused_alone_with_a_one_line_reason(tmp_path: Path, fault: str) -> None:
    damage, problem = BAD_INPUTS[fault]
    root = tmp_path / "out"
    write_tree(root, [GOOD])
    bad_dir = write_run(root, BAD)
    named = damage(bad_dir)
    report = run_collect(root, tmp_path / "b")
    assert report.exit_code == 1
    assert [bundle.bundle_id.split("_")[0] for bundle in report.bundles] == ["gpt-5-2"]
    (refusal,) = report.refused
    assert refusal.error.startswith(f"{named}: ") or refusal.error.startswith(f"{named} ")
    assert problem in refusal.error
    assert "\n" not in refusal.error
    assert not any("broken" in str(path) for path in all_files(tmp_path / "b"))
    assert partial_files(tmp_path / "b") == []


def test_unknown_extra_files_are_left_out_with_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_dir = write_run(root, GOOD)
    (run_dir / "debug.log").write_text("secret-ish log line")
    bundle = only_bundle(run_collect(root, tmp_path / "b"))
    assert "left out 1 unknown file(s): debug.log" in bundle.warnings
    manifest = read_manifest(Path(bundle.archive))
    assert "debug.log" not in [entry["path"] for entry in manifest["files"]]
    assert "left out 1 unknown file(s): debug.log" in manifest["warnings"]


def test_a_folder_in_a_run_is_left_out_with_a_warning_and_verify_agrees(tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_dir = write_run(root, GOOD)
    write_run(root, RunSpec(model="gpt-5.2/mini", rows=4))  # a run below the run: bundled
    (run_dir / "logs").mkdir()
    (run_dir / "logs" / "trace.txt").write_text("important")
    report = run_collect(root, tmp_path / "b", expected_rows={"expert-vqa": 4})
    assert report.refused == [] and len(report.bundles) == 2
    (outer,) = [bundle for bundle in report.bundles if bundle.run_directory == str(run_dir)]
    assert "left out 1 unknown file(s): logs/" in outer.warnings
    manifest = read_manifest(Path(outer.archive))
    assert manifest["inputs"]["left_out"] == {"count": 1, "shown": ["logs/"]}
    assert "left out 1 unknown file(s): logs/" in manifest["warnings"]
    (inner,) = [bundle for bundle in report.bundles if bundle is not outer]
    assert read_manifest(Path(inner.archive))["inputs"]["left_out"] == {"count": 0, "shown": []}
    assert verify([tmp_path / "b"]).exit_code == 0


def test_a_zero_padded_prediction_name_is_stored_canonically_and_said(tmp_path: Path) -> None:
    """prediction_01.json is row 1 and goes into the bundle as predictions/prediction_1.json;
    the user is told, since the bundle cannot record a name it does not keep."""
    root = tmp_path / "out"
    run_dir = write_run(root, GOOD)
    (run_dir / "prediction_1.json").rename(run_dir / "prediction_01.json")
    (run_dir / "prediction_3.json").rename(run_dir / "prediction_0003.json")
    bundle = only_bundle(run_collect(root, tmp_path / "b", expected_rows={"expert-vqa": 4}))
    assert bundle.coverage == "complete"
    assert (
        "renamed 2 prediction file(s) in the bundle: "
        "prediction_01.json to prediction_1.json, prediction_0003.json to prediction_3.json"
    ) in bundle.warnings
    members = [member.name for member in read_members(Path(bundle.archive))]
    assert members[3:] == [f"predictions/prediction_{index}.json" for index in range(4)]
    assert verify([tmp_path / "b"]).exit_code == 0


def test_rerun_is_unchanged_and_a_changed_run_is_replaced(tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_dir = write_run(root, GOOD)
    first = only_bundle(run_collect(root, tmp_path / "b"))
    assert first.outcome == "written"
    second = only_bundle(run_collect(root, tmp_path / "b"))
    assert (second.outcome, second.sha256) == ("unchanged", first.sha256)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["exact_match"]["accuracy"] = 0.99
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    third = only_bundle(run_collect(root, tmp_path / "b"))
    assert third.outcome == "replaced" and third.sha256 != first.sha256
    assert len(all_files(tmp_path / "b")) == 2


class InterruptAfter:
    """A progress sink that raises KeyboardInterrupt (as Ctrl-C would) mid-way through writing."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.writing = False

    def begin(self, label: str, total: int | None, *, unit: str = "items") -> None:
        self.writing = label.startswith("bundling")

    def advance(self, steps: int = 1) -> None:
        if self.writing:
            self.steps -= steps
            if self.steps <= 0:
                raise KeyboardInterrupt


def test_interrupted_collect_leaves_no_partial_bundle(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_run(root, RunSpec(rows=20))
    with pytest.raises(KeyboardInterrupt):
        collect(root, tmp_path / "b", CollectOptions(), InterruptAfter(5))
    assert all_files(tmp_path / "b") == []


def test_interrupted_replacement_keeps_the_previous_bundle(tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_dir = write_run(root, RunSpec(rows=20))
    first = only_bundle(collect(root, tmp_path / "b"))
    before = {path: path.read_bytes() for path in all_files(tmp_path / "b")}
    (run_dir / "metrics.json").write_text('{"changed": {"x": 1}}')
    with pytest.raises(KeyboardInterrupt):
        collect(root, tmp_path / "b", CollectOptions(), InterruptAfter(10))
    assert {path: path.read_bytes() for path in all_files(tmp_path / "b")} == before
    assert Path(first.archive).exists()


class ChangeAfterReading:
    """Edits a prediction once every prediction has been read (a harness still running)."""

    def __init__(self, path: Path, after: int) -> None:
        self.path = path
        self.remaining = after

    def begin(self, label: str, total: int | None, *, unit: str = "items") -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        self.remaining -= steps
        if self.remaining == 0:
            self.path.write_bytes(self.path.read_bytes().replace(b"answer", b"ANSWER"))


def test_the_bundle_holds_exactly_the_bytes_that_were_validated(tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_dir = write_run(root, RunSpec(rows=5))
    original = (run_dir / "prediction_3.json").read_bytes()
    report = collect(
        root, tmp_path / "b", None, ChangeAfterReading(run_dir / "prediction_3.json", 5)
    )
    bundle = only_bundle(report)
    assert (run_dir / "prediction_3.json").read_bytes() != original
    members = {member.name: member.data for member in read_members(Path(bundle.archive))}
    assert members["predictions/prediction_3.json"] == original
    assert verify([tmp_path / "b"]).exit_code == 0


def test_unwritable_bundle_location_is_refused_without_partial_files(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [GOOD])
    first = only_bundle(collect(root, tmp_path / "probe"))
    player_dir = first.bundle_id.split("/")[0]
    bundles = tmp_path / "b"
    bundles.mkdir()
    (bundles / player_dir).write_text("a file where the player directory should be")
    report = collect(root, bundles)
    (refusal,) = report.refused
    assert refusal.error.startswith(str(bundles / player_dir))
    assert "cannot write" in refusal.error
    assert partial_files(bundles) == []


def test_output_root_that_does_not_exist_is_unusable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="output root does not exist"):
        collect(tmp_path / "missing", tmp_path / "b")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("how_do_you", [False, True])
def test_an_output_root_without_runs_is_nothing_to_do(tmp_path: Path, how_do_you: bool) -> None:
    root = tmp_path / "out"
    root.mkdir()
    if how_do_you:
        (root / "how_do_you").mkdir()
    result = run_cli("collect", root, "-o", tmp_path / "b")
    assert result.returncode == 0, result.stderr
    assert f"warning {root}: no dataset-backed run" in result.stderr
    assert "nothing to do" in result.stderr
    assert not (tmp_path / "b").exists()


def test_a_predictions_folder_is_refused_naming_its_parent(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [GOOD])
    result = run_cli("collect", tmp_path / "out" / "expert-vqa_predictions", "-o", tmp_path / "b")
    assert result.returncode == 2
    assert "not an output root" in result.stderr
    assert f"hint: give its parent: {(tmp_path / 'out').resolve()}" in result.stderr


@pytest.mark.parametrize(
    "pairs",
    [
        ["expert-vqa"],
        ["=3"],
        ["x=0"],
        ["x=-1"],
        ["x=three"],
        ["x=3", "x=4"],
        ["x=\u00b2"],  # a digit to str.isdigit, not to int()
        [f"x={2**63}"],  # beyond the int64 column it is published in
    ],
)
def test_bad_expectations_are_usage_errors(pairs: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_expectations(pairs)


def test_expectations_parse() -> None:
    assert parse_expectations(["a=3", "b=10", "a=3"]) == {"a": 3, "b": 10}


def test_bundle_lands_at_player_fingerprint_target(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(model="Qwen/Qwen3.5-27B", rows=1)])
    bundle = only_bundle(collect(root, tmp_path / "b"))
    archive = Path(bundle.archive)
    assert archive.name == f"expert-vqa@{DEFAULT_SHA[:8]}.tar.zst"
    assert archive.parent.name == bundle.bundle_id.split("/")[0]
    assert archive.parent.name.startswith("qwen-qwen3-5-27b_")
    assert archive.parent.parent == tmp_path / "b"
    assert Path(bundle.sidecar) == archive.with_name(f"expert-vqa@{DEFAULT_SHA[:8]}.json")


def test_an_unchanged_rerun_does_not_replace_the_pair(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_run(root, GOOD)
    first = only_bundle(run_collect(root, tmp_path / "b"))
    inodes = {path: path.stat().st_ino for path in all_files(tmp_path / "b")}
    again = only_bundle(run_collect(root, tmp_path / "b"))
    assert again.outcome == "unchanged" and again.sha256 == first.sha256
    assert {path: path.stat().st_ino for path in all_files(tmp_path / "b")} == inodes


def test_a_damaged_sidecar_is_rewritten_even_when_the_archive_is_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_run(root, GOOD)
    first = only_bundle(run_collect(root, tmp_path / "b"))
    original = Path(first.sidecar).read_bytes()
    Path(first.sidecar).write_text("{}")
    assert only_bundle(run_collect(root, tmp_path / "b")).outcome == "unchanged"
    assert Path(first.sidecar).read_bytes() == original


def test_runs_found_ahead_leave_the_leftovers_removed_while_they_are_found(
    tmp_path: Path,
) -> None:
    """sync finds its runs in a child (bundler.local.discoverahead): collect removes what a
    killed run left before it asks for them, which needs no run, and reports it as ever."""
    root = tmp_path / "out"
    write_run(root, GOOD)
    first = only_bundle(run_collect(root, tmp_path / "b"))
    leftover = Path(first.archive).parent / f"{TEMP_PREFIX}x.tar.zst.x7k2m9q1{TEMP_SUFFIX}"
    leftover.write_bytes(b"half an archive")
    seen_when_asked: list[bool] = []

    def found_ahead() -> Discovery:
        seen_when_asked.append(leftover.exists())
        return discover(root)

    report = collect(root, tmp_path / "b", CollectOptions(), discovered=found_ahead)
    assert seen_when_asked == [False]
    assert report.removed_temporaries == [str(leftover)]
    assert [bundle.outcome for bundle in report.bundles] == ["unchanged"]


def test_collect_removes_the_temporary_files_a_killed_run_left(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_run(root, GOOD)
    first = only_bundle(run_collect(root, tmp_path / "b"))
    folder = Path(first.archive).parent
    leftover = folder / f"{TEMP_PREFIX}{Path(first.archive).name}.x7k2m9q1{TEMP_SUFFIX}"
    leftover.write_bytes(b"half an archive")
    unrelated = folder / "reviewer-notes.partial"
    unrelated.write_text("not the bundler's")
    report = run_collect(root, tmp_path / "b")
    assert report.removed_temporaries == [str(leftover)]
    assert not leftover.exists() and unrelated.exists()
    assert run_collect(root, tmp_path / "b").removed_temporaries == []


def test_output_that_is_a_file_is_unusable(tmp_path: Path) -> None:
    write_run(tmp_path / "out", GOOD)
    (tmp_path / "b").write_text("a file")
    with pytest.raises(UsageError, match="exists and is not a directory"):
        run_collect(tmp_path / "out", tmp_path / "b")


def test_filters_that_match_no_run_carry_what_did_not_match(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [GOOD, RunSpec(task="maze", model="other", rows=1)])
    with pytest.raises(NoRunSelectedError) as caught:
        run_collect(tmp_path / "out", tmp_path / "b", tasks=["maze", "nosuchtask"])
    assert caught.value.unmatched == {"tasks": ["nosuchtask"]}
    with pytest.raises(NoRunSelectedError) as caught:
        run_collect(tmp_path / "out", tmp_path / "b", tasks=["maze"], models=["gpt-5.2"])
    assert caught.value.unmatched == {"tasks": ["maze"], "models": ["gpt-5.2"]}
    assert not (tmp_path / "b").exists()


def test_a_bad_run_meta_sorting_first_stops_no_other_run(tmp_path: Path) -> None:
    """Every broken run_meta.json of issue 6 at once, each in a run sorting before the good."""
    root = tmp_path / "out"
    write_run(root, RunSpec(model="zz-good", rows=2))
    faults = [
        _meta_raw("[" * 5000 + "]" * 5000, "x"),
        _meta_raw("9" * 5000, "x"),
        _meta_change("model_name", "\ud800"),
        _bom("run_meta.json"),
        _utf16("run_meta.json"),
    ]
    for number, fault in enumerate(faults):
        fault(write_run(root, RunSpec(model=f"a{number}", rows=2)))
    report = run_collect(root, tmp_path / "b")
    assert [bundle.bundle_id.split("_")[0] for bundle in report.bundles] == ["zz-good"]
    assert len(report.refused) == len(faults)
    assert all(item.error.startswith(f"{item.path}/run_meta.json: ") for item in report.refused)


def test_json_output_is_valid_unicode_when_a_file_name_is_not_utf8(tmp_path: Path) -> None:
    """A refusal names a file whose name has a byte that is not UTF-8; `json` would write it
    as a lone surrogate escape, which strict parsers (pydantic's, serde_json) refuse."""
    [run_dir] = write_tree(tmp_path / "out", [RunSpec(rows=3)])
    os.rename(run_dir / "prediction_1.json", os.fsencode(run_dir) + b"/prediction_1\xff.json")
    result = run_cli("collect", tmp_path / "out", "-o", tmp_path / "b", "--json")
    assert result.returncode == 1, result.stderr
    report = strict_json(result.stdout)  # no lone surrogate
    assert any("prediction_1\\xff.json" in refused["error"] for refused in report["refused"])


def test_a_split_row_count_beyond_int64_is_no_row_count() -> None:
    """--resolve-rows reads a dataset card a stranger wrote: a count the viewer's int64 column
    cannot hold would make every bundle's table unloadable, so it counts as unresolved."""
    card = {"splits": [{"name": "test", "num_examples": 2**63}]}
    assert split_rows(card, "test") is None
    assert (
        split_rows({"splits": [{"name": "test", "num_examples": 2**63 - 1}]}, "test") == 2**63 - 1
    )
