"""Finding run directories at any depth, without following links, and saying what was skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factory import RunSpec, write_how_do_you, write_run, write_tree
from helpers import nested_folders

from bundler.core.errors import UsageError
from bundler.local.discover import (
    _FOLDER,
    _IDENTITY,
    PREDICTION_FILE,
    _scan,
    _wide_identity,
    discover,
)


def test_runs_are_found_at_any_depth_in_name_order(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        [
            RunSpec(model="gpt-5.2", rows=1),
            RunSpec(model="Qwen/Qwen3.5-27B", rows=1),
            RunSpec(model="org/family/deep-model", rows=1),
            RunSpec(task="maze-solve", model="gpt-5.2", rows=1),
        ],
    )
    found = discover(tmp_path)
    assert [run.relative for run in found.runs] == [
        "expert-vqa_predictions/Qwen/Qwen3.5-27B",
        "expert-vqa_predictions/gpt-5.2",
        "expert-vqa_predictions/org/family/deep-model",
        "maze-solve_predictions/gpt-5.2",
    ]
    assert [run.task_dir_name for run in found.runs] == ["expert-vqa"] * 3 + ["maze-solve"]
    assert all(run.path == tmp_path / run.relative for run in found.runs)
    assert found.refused == []


def test_how_do_you_is_skipped_as_not_a_dataset_backed_target(tmp_path: Path) -> None:
    write_run(tmp_path, RunSpec(rows=1))
    write_how_do_you(tmp_path, "Qwen/Qwen3.5-27B")
    found = discover(tmp_path)
    assert len(found.runs) == 1
    skipped = {item.path: item.reason for item in found.skipped}
    assert skipped == {str(tmp_path / "how_do_you"): "not a dataset-backed target"}


def test_other_entries_are_skipped_with_a_reason(tmp_path: Path) -> None:
    write_run(tmp_path, RunSpec(rows=1))
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "logs").mkdir()
    reasons = {Path(item.path).name: item.reason for item in discover(tmp_path).skipped}
    assert reasons == {
        "notes.txt": "not a statics output directory",
        "logs": "not a <task>_predictions directory",
    }


def test_a_directory_with_only_predictions_is_still_a_run(tmp_path: Path) -> None:
    run = write_run(tmp_path, RunSpec(rows=2))
    (run / "run_meta.json").unlink()
    (run / "metrics.json").unlink()
    assert [found.path for found in discover(tmp_path).runs] == [run]


def test_directories_without_run_files_are_not_runs(tmp_path: Path) -> None:
    (tmp_path / "expert-vqa_predictions" / "empty" / "deeper").mkdir(parents=True)
    found = discover(tmp_path)
    assert found.runs == [] and found.refused == []


def test_a_run_names_its_subfolders_that_hold_no_run(tmp_path: Path) -> None:
    """Model names hold "/", so a run directory may hold other runs below it: those folders
    are walked as runs, and only the others are for the run to list as left out."""
    write_tree(
        tmp_path,
        [
            RunSpec(model="Qwen", rows=1),
            RunSpec(model="Qwen/Qwen3.5-27B", rows=1),
            RunSpec(model="Qwen/org/deep-model", rows=1),
        ],
    )
    outer = tmp_path / "expert-vqa_predictions" / "Qwen"
    (outer / "logs").mkdir()
    (outer / "logs" / "trace.txt").write_text("important")
    (outer / "empty" / "deeper").mkdir(parents=True)
    (outer / "odd").mkdir()
    (outer / "odd" / "prediction_0.json\n").write_text("{}")
    (outer / "linked").symlink_to(outer / "logs", target_is_directory=True)
    found = discover(tmp_path)
    folders = {run.relative: run.left_out_folders for run in found.runs}
    assert folders == {
        "expert-vqa_predictions/Qwen": ("empty", "logs", "odd"),
        "expert-vqa_predictions/Qwen/Qwen3.5-27B": (),
        "expert-vqa_predictions/Qwen/org/deep-model": (),
    }
    assert [Path(item.path).name for item in found.refused] == ["linked"]


def test_a_name_that_only_ends_like_a_run_file_makes_no_run(tmp_path: Path) -> None:
    # "prediction_0.json\n" is not a prediction file (`$` would match before the newline).
    folder = tmp_path / "expert-vqa_predictions" / "not-a-run"
    folder.mkdir(parents=True)
    (folder / "prediction_0.json\n").write_text("{}")
    assert discover(tmp_path).runs == []


def test_links_are_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    real = write_run(elsewhere, RunSpec(model="secret", rows=1))
    root = tmp_path / "out"
    write_run(root, RunSpec(rows=1))
    (root / "linked_predictions").symlink_to(real.parent, target_is_directory=True)
    (root / "expert-vqa_predictions" / "linked-model").symlink_to(real, target_is_directory=True)
    found = discover(root)
    assert [run.relative for run in found.runs] == ["expert-vqa_predictions/gpt-5.2"]
    refused = {Path(item.path).name: item.reason for item in found.refused}
    assert refused == {
        "linked_predictions": "symbolic link; links are never followed",
        "linked-model": "symbolic link; links are never followed",
    }


def test_unlistable_directory_is_refused(tmp_path: Path) -> None:
    write_run(tmp_path, RunSpec(rows=1))
    # A FIFO cannot stand in here (not a directory), so list a directory we remove rights on;
    # root ignores those, so this only asserts the refusal where the OS enforces it.
    locked = tmp_path / "expert-vqa_predictions" / "locked"
    locked.mkdir()
    (locked / "prediction_0.json").write_text("{}")
    locked.chmod(0)
    try:
        found = discover(tmp_path)
    finally:
        locked.chmod(0o755)
    if os.geteuid() == 0:
        assert str(locked) in [str(run.path) for run in found.runs]
    else:
        assert [item.path for item in found.refused] == [str(locked)]
        assert "cannot list" in found.refused[0].reason


def test_missing_output_root_is_unusable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="output root does not exist"):
        discover(tmp_path / "nope")


def test_output_root_that_is_a_file_or_link_is_unusable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for name in ("file", "link"):
        with pytest.raises(UsageError, match="not a directory"):
            discover(tmp_path / name)


def test_a_tree_deeper_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    """1,200 nested folders under a task folder (issue 6): discovery keeps its own stack, so it
    neither overflows Python's nor misses a run at the bottom or beside them."""
    write_run(tmp_path, RunSpec(rows=1))
    with nested_folders(tmp_path / "expert-vqa_predictions" / "deep", 1200) as bottom:
        (bottom / "prediction_0.json").write_text("{}")
        found = discover(tmp_path)
    nested = "/".join(["deep", *["d"] * 1200])
    relatives = [item.relative for item in found.runs]
    assert relatives == [f"expert-vqa_predictions/{nested}", "expert-vqa_predictions/gpt-5.2"]
    assert found.refused == []


def test_files_outside_every_run_are_reported_as_skipped(tmp_path: Path) -> None:
    """Nothing a user gave is dropped without a word: a file in a folder on the way to a run
    (`Qwen/` holds no run files, its `Qwen3.5-27B/` is a run) and a folder that leads to no
    run are reported; a run's own extra files and folders are the run's to list as left out."""
    write_tree(
        tmp_path, [RunSpec(model="gpt-5.2", rows=1), RunSpec(model="Qwen/Qwen3.5-27B", rows=1)]
    )
    task = tmp_path / "expert-vqa_predictions"
    (task / "README.md").write_text("notes")
    (task / "Qwen" / "notes.txt").write_text("notes")
    (task / "old" / "logs").mkdir(parents=True)
    (task / "old" / "logs" / "trace.txt").write_text("trace")
    (task / "gpt-5.2" / "logs").mkdir()
    (task / "gpt-5.2" / "extra.txt").write_text("left out by the run")
    found = discover(tmp_path)
    reported = {
        Path(item.path).relative_to(task).as_posix(): item.reason
        for item in found.skipped
        if Path(item.path).is_relative_to(task)
    }
    assert reported == {
        "README.md": "not in a run directory; never bundled",
        "Qwen/notes.txt": "not in a run directory; never bundled",
        "old": "holds no run; never bundled",
    }
    assert [run.relative for run in found.runs] == [
        "expert-vqa_predictions/Qwen/Qwen3.5-27B",
        "expert-vqa_predictions/gpt-5.2",
    ]


def test_a_wide_tree_is_found_whatever_sits_among_its_runs(tmp_path: Path) -> None:
    """Hundreds of model folders under one org, with a folder that is no run, a stray file, a
    link and a run's own subfolder among them: each is reported for what it is, in order."""
    root = tmp_path / "out"
    wide = [f"wide/model-{number:03d}" for number in range(300)]
    narrow = [f"org-{number % 3}/model-{number}" for number in range(60)]
    specs = [RunSpec(task="maze", model=model, rows=2) for model in wide]
    write_tree(root, specs + [RunSpec(model=model, rows=1) for model in narrow], how_do_you=False)
    org = root / "maze_predictions" / "wide"
    (org / "model-000-notes.txt").write_text("not a run")
    (org / "model-200-empty").mkdir()
    (org / "model-100-linked").symlink_to(org / "model-001")
    (org / "model-290" / "scratch").mkdir()
    found = discover(root)
    assert len(found.runs) == len(wide) + len(narrow)
    assert all(run.listing is not None for run in found.runs)
    assert [item.path for item in found.refused] == [str(org / "model-100-linked")]
    assert [item.path for item in found.skipped] == [
        str(org / "model-000-notes.txt"),
        str(org / "model-200-empty"),
    ]
    (scratched,) = [run for run in found.runs if run.relative.endswith("model-290")]
    assert scratched.left_out_folders == ("scratch",)
    relatives = [run.relative for run in found.runs]
    assert relatives == sorted(relatives, key=lambda relative: relative.split("/"))


def test_a_link_that_leads_nowhere_is_reported_like_a_file(tmp_path: Path) -> None:
    """A link to itself cannot be followed (ELOOP): it is no linked folder to refuse, but an
    entry like a file, never an internal error."""
    run = write_run(tmp_path, RunSpec(rows=1))
    (run / "loop").symlink_to("loop")
    (run.parent / "loop").symlink_to("loop")
    found = discover(tmp_path)
    assert [item.path for item in found.runs] == [run]
    assert found.refused == []
    assert [(item.path, item.reason) for item in found.skipped] == [
        (str(run.parent / "loop"), "not in a run directory; never bundled")
    ]
    assert found.runs[0].listing is not None


def _status(mode: int, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> os.stat_result:
    """A stat result with these values (the ten of the tuple, three float times, then the
    atime, mtime and ctime in nanoseconds)."""
    return os.stat_result(
        [mode, inode, 0, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime_ns, ctime_ns]
    )


def test_a_listing_holds_every_value_a_stat_can_give() -> None:
    """An inode number above 2**63 (some network and overlay file systems) does not fit a
    signed 64-bit field: it is packed modulo 2**64, which gives the same bytes as the signed
    packing for any value that fits (a listing recorded before stays the same), and stays
    one-to-one."""
    values = (0o100644, 4096, 1_700_000_000_123_456_789, 1_700_000_000_987_654_321, 42)
    assert _wide_identity(_status(*values)) == _IDENTITY.pack(*values)
    wide = [_wide_identity(_status(*values[:4], inode)) for inode in (2**63, 2**64 - 1, 2**63 - 1)]
    assert len({*wide, _FOLDER}) == 4


def test_a_folder_swapped_for_a_link_after_its_parent_was_listed_is_refused(
    tmp_path: Path,
) -> None:
    """The walk opens each folder without following a link: one that became a link between
    the listing of its parent and its own (as `_scan` is handed it here) is refused, and
    nothing behind the link is walked."""
    elsewhere = write_run(tmp_path / "elsewhere", RunSpec(model="secret", rows=1))
    swapped = tmp_path / "swapped"
    swapped.symlink_to(elsewhere.parent, target_is_directory=True)
    scanned = _scan([str(swapped)])
    assert scanned.found == [] and scanned.elsewhere == []
    assert [(item.path, item.reason) for item in scanned.refused] == [
        (str(swapped), "symbolic link; links are never followed")
    ]


NAMES_LIKE_PREDICTIONS = (
    "prediction_1.json",
    "prediction_.json",
    "prediction_.json.json",
    "prediction_x\n.json",
    "prediction_1.json\n",
    "\nprediction_1.json",
    "prediction_1.JSON",
    "prediction.json",
    "prediction_json",
    "Prediction_1.json",
    "prediction_\u00e9\r.json",
    "xprediction_1.json",
)


@pytest.mark.parametrize("name", NAMES_LIKE_PREDICTIONS)
def test_a_file_is_counted_a_prediction_exactly_when_the_pattern_matches_it(
    tmp_path: Path, name: str
) -> None:
    """The walk tells prediction files without the regular expression (it lists tens of
    thousands of names): it must agree with PREDICTION_FILE on every name, newlines too."""
    run = tmp_path / "t_predictions" / "m"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text("{}")
    (run / name).write_text("{}")
    found = _scan([str(tmp_path / "t_predictions")]).found
    predictions = [count for folder, count, *_ in found if folder == str(run)]
    assert predictions == [int(PREDICTION_FILE.fullmatch(name) is not None)]
