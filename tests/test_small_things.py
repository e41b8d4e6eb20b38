"""The smaller things a newcomer meets in the first hour, each as a user would expect
(the real CLI on real files)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from factory import RunSpec, write_tree
from helpers import BUNDLER, cli_env, one_line_error, run_cli


def many_bundles(tmp_path: Path, count: int = 120) -> Path:
    root, bundles = tmp_path / "out", tmp_path / "bundles"
    write_tree(root, [RunSpec(model=f"m{number}", rows=1) for number in range(count)])
    result = run_cli("collect", root, "-o", bundles, "--allow-partial")
    assert result.returncode == 0, result.stderr
    return bundles


def test_a_closed_pipe_ends_quietly_with_exit_0(tmp_path: Path) -> None:
    bundles = many_bundles(tmp_path)
    for args, streams in (
        (["verify", bundles], {"stderr": subprocess.STDOUT}),  # bundler verify 2>&1 | head
        (["verify", bundles, "--json"], {"stderr": subprocess.DEVNULL}),  # ... --json | head
        (["--help"], {"stderr": subprocess.STDOUT}),
    ):
        process = subprocess.Popen(
            [str(BUNDLER), *map(str, args)],
            stdout=subprocess.PIPE,
            env=cli_env(),
            **streams,  # type: ignore[call-overload]
        )
        assert process.stdout is not None
        process.stdout.read(1)
        process.stdout.close()  # `head -c 1` has read what it wanted
        assert process.wait(timeout=120) == 0, args


def test_diff_names_its_arguments_a_and_b(tmp_path: Path) -> None:
    usage = run_cli("diff", "--help", env={"COLUMNS": "100"})
    assert "{A} {B}" in usage.stdout
    missing = run_cli("diff", tmp_path / "one.tar.zst")
    assert missing.returncode == 2
    assert "Missing argument 'B'" in one_line_error(missing.stderr)


def test_an_unmatched_filter_lists_the_names_that_exist(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(task="maze", rows=1), RunSpec(task="wires", model="other", rows=1)])
    result = run_cli("collect", root, "-o", tmp_path / "b", "--task", "nosuch")
    assert result.returncode == 2
    assert "hint: tasks here: maze, wires" in result.stderr
    models = run_cli("collect", root, "-o", tmp_path / "b", "--model", "nobody", "--json")
    assert "models here: gpt-5.2, other" in json.loads(models.stdout)["hint"]


def test_runs_left_out_by_filters_are_counted_not_listed(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(model=f"m{number}", rows=1) for number in range(5)])
    result = run_cli("collect", root, "-o", tmp_path / "b", "--model", "m0", "--allow-partial")
    assert result.returncode == 0, result.stderr
    assert "4 run(s) left out by the filters" in result.stderr
    assert "not selected by filters" not in result.stderr


def test_an_interrupted_collect_leaves_no_empty_player_folder(tmp_path: Path) -> None:
    import signal

    from test_cli import _interrupt_mid_write

    returncode, bundles = _interrupt_mid_write(tmp_path, signal.SIGINT)
    assert returncode == 130
    assert [path for path in bundles.iterdir() if path.is_dir()] == []


def test_inspect_of_a_bad_bundle_shows_what_it_could_read_and_the_failing_check(
    tmp_path: Path,
) -> None:
    root, bundles = tmp_path / "out", tmp_path / "bundles"
    write_tree(root, [RunSpec(model="gpt-5.2", rows=4)])
    assert run_cli("collect", root, "-o", bundles, "--expect", "expert-vqa=4").returncode == 0
    (archive,) = bundles.rglob("*.tar.zst")
    data = bytearray(archive.read_bytes())
    data[10:30] = b"x" * 20  # the manifest's frame: the archive's own claim is unreadable
    archive.write_bytes(bytes(data))
    result = run_cli("inspect", archive)
    assert result.returncode == 1
    assert "its sidecar claims (not backed by the archive)" in result.stderr
    assert "expert-vqa@a1b2c3d4" in result.stderr and "complete: 4 of 4 rows" in result.stderr
    assert "failed zstd" in result.stderr
    as_json = json.loads(run_cli("inspect", archive, "--json").stdout)
    assert as_json["claim"] is None and as_json["sidecar_claim"]["target"] == "expert-vqa@a1b2c3d4"
