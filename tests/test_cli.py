"""The installed `bundler` console script, run as a user runs it: exit codes, one-line errors
on stderr, JSON on stdout, environment variables, signals and a full disk."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from factory import RunSpec, write_run, write_sample_output, write_tree
from helpers import (
    BUNDLER,
    all_files,
    cli_env,
    forge,
    limit_file_size,
    one_line_error,
    partial_files,
    probe_console_script,
    read_manifest,
    run_cli,
    run_cli_process,
    run_python,
)

from bundler.local.bundling import FORK_WEIGHT, RUN_WEIGHT
from bundler.local.layout import is_temporary_name

SAMPLE = Path(__file__).parent / "sample_output"
SAMPLE_EXPECT = ("--expect", "expert-vqa=4", "--expect", "maze-solve=3")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "out"
    write_tree(
        root,
        [RunSpec(model="gpt-5.2", rows=4), RunSpec(model="Qwen/Qwen3.5-27B", rows=4)],
    )
    return root


def test_the_console_script_is_installed() -> None:
    assert BUNDLER.exists()
    result = run_cli_process("--help")
    assert result.returncode == 0
    for command in ("collect", "verify", "inspect"):
        assert command in result.stdout


def test_collect_json_on_stdout_human_on_stderr(root: Path, tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    result = run_cli("collect", root, "-o", bundles, "--expect", "expert-vqa=4", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["exit_code"] == 0
    assert len(report["bundles"]) == 2
    assert {bundle["coverage"] for bundle in report["bundles"]} == {"complete"}
    assert report["skipped"] == [
        {"path": str(root / "how_do_you"), "reason": "not a dataset-backed target"}
    ]
    assert "2 bundle(s) ready, 0 input(s) refused, 1 skipped" in result.stderr
    assert "skipped" in result.stderr and "not a dataset-backed target" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(all_files(bundles)) == 4


def test_collect_without_json_writes_nothing_on_stdout(root: Path, tmp_path: Path) -> None:
    result = run_cli("collect", root, "-o", tmp_path / "b")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "coverage unknown" in result.stderr


def test_defaults_are_output_and_bundles_in_the_working_directory(tmp_path: Path) -> None:
    write_run(tmp_path / "output", RunSpec(rows=2))
    result = run_cli("collect", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "bundles").rglob("*.tar.zst"))) == 1


def test_a_refused_run_is_one_line_and_the_others_are_written(root: Path, tmp_path: Path) -> None:
    bad = write_run(root, RunSpec(model="broken", rows=3))
    (bad / "prediction_1.json").write_text('{"index": 1}')
    result = run_cli("collect", root, "-o", tmp_path / "b", "--json")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    refused = [line for line in result.stderr.splitlines() if line.startswith("refused")]
    assert len(refused) == 1
    assert refused[0].startswith(f"refused {bad / 'prediction_1.json'}: missing field 'usage'")
    report = json.loads(result.stdout)
    assert report["exit_code"] == 1 and len(report["bundles"]) == 2


def test_every_refused_run_exits_1_with_nothing_written(tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_dir = write_run(root, RunSpec(rows=2))
    (run_dir / "run_meta.json").write_text("{")
    result = run_cli("collect", root, "-o", tmp_path / "b")
    assert result.returncode == 1
    assert f"refused {run_dir / 'run_meta.json'}: not valid JSON" in result.stderr
    assert not (tmp_path / "b").exists() or all_files(tmp_path / "b") == []


def test_missing_output_root_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = run_cli("collect", missing, "-o", tmp_path / "b")
    assert result.returncode == 2
    assert one_line_error(result.stderr) == f"error: {missing}: output root does not exist"
    assert not (tmp_path / "b").exists()


def test_collect_of_an_empty_folder_loads_no_stage_that_reads_or_writes_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    code, state = probe_console_script(
        tmp_path, "collect", tmp_path / "empty", "-o", tmp_path / "b"
    )
    assert code == 0  # nothing to do
    assert (
        "bundler.local.collect" in state["loaded"] and "bundler.local.discover" in state["loaded"]
    )
    stages = ("selection", "bundling", "runs", "manifest", "schema", "archive", "fileio", "lock")
    stages += ("claim",)
    assert [name for name in stages if f"bundler.local.{name}" in state["loaded"]] == []


def test_the_console_script_collects_cycles_rarely_and_not_at_exit(
    root: Path, tmp_path: Path
) -> None:
    from bundler.cli.app import GC_YOUNG_THRESHOLD

    code, state = probe_console_script(tmp_path, "collect", root, "-o", tmp_path / "b")
    assert code == 0 and "bundler.local.runs" in state["loaded"]
    assert state["young_threshold"] == GC_YOUNG_THRESHOLD > 700  # Python's default is 700
    assert state["frozen"] > 10_000  # every object alive at exit: no final collection walks them


def test_errors_are_json_too(tmp_path: Path) -> None:
    result = run_cli("collect", tmp_path / "nope", "--json")
    assert result.returncode == 2
    data = json.loads(result.stdout)
    assert data["exit_code"] == 2 and "output root does not exist" in data["error"]


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run_cli("collect", tmp_path / "nope", "--debug")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert "UsageError" in result.stderr and "NoneType: None" not in result.stderr


@pytest.mark.parametrize("expect", ["expert-vqa", "expert-vqa=0", "expert-vqa=x"])
def test_bad_expect_is_a_usage_error(root: Path, tmp_path: Path, expect: str) -> None:
    result = run_cli("collect", root, "-o", tmp_path / "b", "--expect", expect)
    assert result.returncode == 2
    assert "expected TASK=ROWS" in one_line_error(result.stderr)


def test_expect_and_allow_partial(root: Path, tmp_path: Path) -> None:
    refused = run_cli("collect", root, "-o", tmp_path / "a", "--expect", "expert-vqa=9", "--json")
    assert refused.returncode == 1
    assert len(json.loads(refused.stdout)["refused"]) == 2
    assert "partial run: 4 of 9 rows" in refused.stderr
    allowed = run_cli(
        "collect",
        root,
        "-o",
        tmp_path / "b",
        "--expect",
        "expert-vqa=9",
        "--allow-partial",
        "--json",
    )
    assert allowed.returncode == 0, allowed.stderr
    assert {b["coverage"] for b in json.loads(allowed.stdout)["bundles"]} == {"partial"}


def test_task_and_model_filters(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(
        root,
        [
            RunSpec(model="gpt-5.2", rows=1),
            RunSpec(model="provider/raw-name", player_name="nice-player", rows=1),
            RunSpec(task="maze", model="gpt-5.2", rows=1),
        ],
    )

    def targets(*filters: str) -> list[str]:
        result = run_cli("collect", root, "-o", tmp_path / "b", "--json", *filters)
        assert result.returncode == 0, result.stderr
        return sorted(b["bundle_id"] for b in json.loads(result.stdout)["bundles"])

    assert [t.split("/")[1] for t in targets("--task", "maze")] == ["maze@a1b2c3d4"]
    assert [t.split("_")[0] for t in targets("--model", "nice-player")] == ["nice-player"]
    assert [t.split("_")[0] for t in targets("--model", "provider/raw-name")] == ["nice-player"]
    both = targets("--task", "expert-vqa", "--task", "maze", "--model", "gpt-5.2")
    assert len(both) == 2


@pytest.mark.parametrize(
    ("filters", "line"),
    [
        (("--task", "nosuchtask"), "error: --task nosuchtask matched no run"),
        (("--task", "maze", "--task", "mzae"), "error: --task mzae matched no run"),
        (("--model", "nobody"), "error: --model nobody matched no run"),
        (("--model", "no one"), "error: --model 'no one' matched no run"),
        # Each matches some run, but no run has both.
        (("--task", "maze", "--model", "other"), "error: --task maze --model other matched no run"),
    ],
)
def test_filters_that_match_nothing_are_a_usage_error(
    tmp_path: Path, filters: tuple[str, ...], line: str
) -> None:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(task="maze", rows=1), RunSpec(model="other", rows=1)])
    result = run_cli("collect", root, "-o", tmp_path / "b", *filters)
    assert result.returncode == 2, result.stderr
    assert one_line_error(result.stderr) == line
    assert not (tmp_path / "b").exists()
    as_json = run_cli("collect", root, "-o", tmp_path / "b", *filters, "--json")
    assert json.loads(as_json.stdout)["error"] == line.removeprefix("error: ")


def test_output_that_is_a_file_is_a_usage_error(root: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine")
    result = run_cli("collect", root, "-o", taken)
    assert result.returncode == 2
    assert one_line_error(result.stderr) == f"error: {taken}: exists and is not a directory"
    assert taken.read_text() == "mine"


def test_a_refused_linked_run_directory_is_named(root: Path, tmp_path: Path) -> None:
    real = write_run(tmp_path / "elsewhere", RunSpec(model="secret", rows=1))
    link = root / "expert-vqa_predictions" / "linked"
    link.symlink_to(real, target_is_directory=True)
    result = run_cli("collect", root, "-o", tmp_path / "b", "--json")
    assert result.returncode == 1
    refused = [line for line in result.stderr.splitlines() if line.startswith("refused")]
    assert refused == [f"refused {link}: symbolic link; links are never followed"]
    (item,) = json.loads(result.stdout)["refused"]
    assert item == {"path": str(link), "error": f"{link}: symbolic link; links are never followed"}


ESC = "\x1b[2J\x1b]0;pwned\x07"
"""Clears the screen and retitles the terminal, if it ever reaches one raw."""


def test_control_characters_from_inputs_never_reach_the_terminal(tmp_path: Path) -> None:
    root = tmp_path / "out"
    spec = RunSpec(rows=2, model=f"gpt{ESC}", git_sha=f"abc{ESC}-dirty", metrics={f"s{ESC}": {}})
    run_dir = write_run(root, spec)
    (run_dir / f"notes{ESC}.txt").write_text("x")
    (root / f"stray{ESC}").write_text("x")
    broken = write_run(root, RunSpec(model="broken", rows=1))
    (broken / f"prediction_{ESC}.json").write_text("{}")
    bundles = tmp_path / f"b{ESC}"
    collected = run_cli("collect", root, "-o", bundles)
    assert collected.returncode == 1, collected.stderr
    archive = next(bundles.rglob("*.tar.zst"))
    results = [collected, run_cli("verify", bundles), run_cli("inspect", archive)]
    assert [result.returncode for result in results] == [1, 0, 0]
    for result in results:
        assert "\x1b" not in result.stderr and "\x07" not in result.stderr, result.stderr
    shown = "".join(result.stderr for result in results)
    for escaped in (
        "gpt\\x1b[2J\\x1b]0;pwned\\x07",  # model name (inspect)
        "abc\\x1b[2J\\x1b]0;pwned\\x07-dirty",  # git sha (inspect, dirty-tree warning)
        "notes\\x1b[2J",  # a left-out file (warning)
        "stray\\x1b[2J",  # a skipped entry
        "prediction_\\x1b[2J",  # a refused file name
        "b\\x1b[2J",  # the bundles folder (collect's table, verify's lines)
        "s\\x1b[2J",  # a metric name (inspect)
    ):
        assert escaped in shown, escaped
    error = run_cli("verify", tmp_path / f"nope{ESC}")
    assert error.returncode == 2 and "\x1b" not in error.stderr
    assert "nope\\x1b[2J" in one_line_error(error.stderr)


def test_emoji_codes_in_inputs_read_as_written(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_run(root, RunSpec(rows=2, model="gpt:fire:", metrics={":thumbs_up:": {"n": 1}}))
    bundles = tmp_path / "b"
    assert run_cli("collect", root, "-o", bundles, "--allow-partial").returncode == 0
    inspected = run_cli("inspect", next(bundles.rglob("*.tar.zst")))
    assert inspected.returncode == 0, inspected.stderr
    assert "gpt:fire:" in inspected.stderr and ":thumbs_up:" in inspected.stderr
    assert "\N{FIRE}" not in inspected.stderr and "\N{THUMBS UP SIGN}" not in inspected.stderr


def test_progress_is_drawn_on_a_terminal_and_not_in_a_log() -> None:
    from rich.console import Console

    from bundler.cli.render import progress_on
    from bundler.core.progress import NoProgress

    with progress_on(Console(file=io.StringIO(), force_terminal=False)) as progress:
        assert isinstance(progress, NoProgress)
    drawn = io.StringIO()
    with progress_on(Console(file=drawn, force_terminal=True, width=100)) as progress:
        progress.begin("bundling expert-vqa@unpinned", 4)
        progress.advance(4)
    assert "bundling expert-vqa@unpinned" in drawn.getvalue()
    assert "4/4" in drawn.getvalue()


def test_file_names_that_are_not_utf8_keep_the_json_valid(root: Path, tmp_path: Path) -> None:
    run_dir = root / "expert-vqa_predictions" / "gpt-5.2"
    odd = os.fsdecode(b"notes-\xff.txt")
    (run_dir / odd).write_text("x")
    (root / os.fsdecode(b"stray-\xfe")).write_text("x")
    result = run_cli("collect", root, "-o", tmp_path / "b", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.isascii()
    report = json.loads(result.stdout)
    warnings = next(b["warnings"] for b in report["bundles"] if "gpt-5-2" in b["bundle_id"])
    assert "left out 1 unknown file(s): notes-\\xff.txt" in warnings
    # The byte is shown as \xfe, as the manifest shows left-out names: a lone surrogate
    # escape is valid JSON syntax but not Unicode, which strict parsers refuse.
    assert f"{root}/stray-\\xfe" in [item["path"] for item in report["skipped"]]
    assert run_cli("verify", tmp_path / "b").returncode == 0


def test_submitter_from_options_and_environment(root: Path, tmp_path: Path) -> None:
    env = {
        "BUNDLER_SUBMITTER_NAME": "Env Name",
        "BUNDLER_SUBMITTER_CONTACT": "env@example.org",
        "BUNDLER_SUBMITTER_AFFILIATION": "Env Lab",
    }
    result = run_cli("collect", root, "-o", tmp_path / "a", "--json", env=env)
    assert result.returncode == 0, result.stderr
    archive = Path(json.loads(result.stdout)["bundles"][0]["archive"])
    assert read_manifest(archive)["submitter"] == {
        "name": "Env Name",
        "contact": "env@example.org",
        "affiliation": "Env Lab",
    }
    result = run_cli(
        "collect",
        root,
        "-o",
        tmp_path / "b",
        "--json",
        "--submitter-name",
        "Flag Name",
        "--submitter-affiliation",
        "Flag Lab",
        env=env,
    )
    archive = Path(json.loads(result.stdout)["bundles"][0]["archive"])
    assert read_manifest(archive)["submitter"] == {
        "name": "Flag Name",
        "contact": "env@example.org",
        "affiliation": "Flag Lab",
    }


def test_level_changes_bytes_not_content(root: Path, tmp_path: Path) -> None:
    low = run_cli("collect", root, "-o", tmp_path / "a", "--level", "1", "--json")
    high = run_cli("collect", root, "-o", tmp_path / "b", "--level", "19", "--json")
    assert low.returncode == high.returncode == 0
    low_bundle = json.loads(low.stdout)["bundles"][0]
    high_bundle = json.loads(high.stdout)["bundles"][0]
    assert low_bundle["bundle_id"] == high_bundle["bundle_id"]
    assert low_bundle["sha256"] != high_bundle["sha256"]
    low_manifest = read_manifest(Path(low_bundle["archive"]))
    high_manifest = read_manifest(Path(high_bundle["archive"]))
    assert (low_manifest["inputs"].pop("level"), high_manifest["inputs"].pop("level")) == (1, 19)
    assert low_manifest == high_manifest  # the level is recorded, nothing else differs
    assert run_cli("verify", tmp_path / "a", tmp_path / "b").returncode == 0
    assert run_cli("collect", root, "--level", "0").returncode == 2
    assert run_cli("collect", root, "--level", "20").returncode == 2  # ultra: too much memory


def test_rerun_reports_unchanged(root: Path, tmp_path: Path) -> None:
    first = run_cli("collect", root, "-o", tmp_path / "b", "--json")
    second = run_cli("collect", root, "-o", tmp_path / "b", "--json")
    assert {b["outcome"] for b in json.loads(first.stdout)["bundles"]} == {"written"}
    assert {b["outcome"] for b in json.loads(second.stdout)["bundles"]} == {"unchanged"}


def test_verify_exit_codes_and_json(root: Path, tmp_path: Path) -> None:
    bundles = tmp_path / "b"
    assert run_cli("collect", root, "-o", bundles).returncode == 0
    good = run_cli("verify", bundles, "--json")
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    assert data["exit_code"] == 0 and len(data["bundles"]) == 2
    assert "2 of 2 bundle(s) verified" in good.stderr

    archive = sorted(bundles.rglob("*.tar.zst"))[0]

    def tamper(members: list) -> list:  # type: ignore[type-arg]
        members[3].data = members[3].data.replace(b"answer", b"ANSWER")
        return members

    forge(archive, tamper)
    bad = run_cli("verify", bundles, "--json")
    assert bad.returncode == 1
    verdicts = {b["archive"]: b for b in json.loads(bad.stdout)["bundles"]}
    assert any(c["status"] == "failed" for c in verdicts[str(archive)]["checks"])
    assert f"FAILED {archive}" in bad.stderr
    assert "1 of 2 bundle(s) verified" in bad.stderr
    assert "Traceback" not in bad.stderr

    missing = run_cli("verify", tmp_path / "nope")
    assert missing.returncode == 2
    assert "no such bundle archive or directory" in one_line_error(missing.stderr)


def test_full_disk_while_writing_leaves_nothing_partial(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_tree(
        root,
        [
            RunSpec(model="small", rows=1, thoughts_chars=10),
            RunSpec(model="big", rows=300, thoughts_chars=4000),
        ],
    )
    bundles = tmp_path / "b"
    limit = 64 << 10
    result = run_cli_process(
        "collect", root, "-o", bundles, "--json", preexec_fn=limit_file_size(limit)
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert [b["bundle_id"].split("_")[0] for b in report["bundles"]] == ["small"]
    (refusal,) = report["refused"]
    # The limit is met writing the compressed body or the archive, depending on how the body
    # is compressed; either way the line names the run's path and the problem.
    assert refusal["error"].endswith("cannot write: file size limit exceeded")
    assert "big" in refusal["error"]
    assert partial_files(bundles) == []
    assert [path.name.split(".")[-1] for path in all_files(bundles)] == ["json", "zst"]


def _wait_for_partial(directory: Path, process: subprocess.Popen[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if directory.exists() and partial_files(directory):
            return True
        time.sleep(0.002)
    return False


def _interrupt_mid_write(tmp_path: Path, signum: int) -> tuple[int, Path]:
    root = tmp_path / "out"
    write_run(root, RunSpec(rows=3000, thoughts_chars=2000))
    bundles = tmp_path / "b"
    process = subprocess.Popen(
        [str(BUNDLER), "collect", str(root), "-o", str(bundles)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env(),
    )
    try:
        assert _wait_for_partial(bundles, process, 60), "collect never started writing"
        process.send_signal(signum)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, bundles


def test_ctrl_c_while_writing_leaves_nothing_partial(tmp_path: Path) -> None:
    returncode, bundles = _interrupt_mid_write(tmp_path, signal.SIGINT)
    assert returncode == 130
    assert all_files(bundles) == []


def test_sigterm_while_writing_leaves_nothing_partial(tmp_path: Path) -> None:
    returncode, bundles = _interrupt_mid_write(tmp_path, signal.SIGTERM)
    assert returncode == 143
    assert all_files(bundles) == []


@pytest.mark.parametrize("how", ["SIGTERM to the command", "SIGINT to its process group"])
def test_a_stop_while_a_forked_child_writes_half_the_runs_leaves_nothing_partial(
    tmp_path: Path, how: str
) -> None:
    """Many runs are bundled half in a forked child (bundler.local.bundling.bundle_all). A stop
    signal while it writes (`kill` reaches the command alone, Ctrl-C the whole group) must
    still leave no temporary file: the child is told to stop and cleans up as the command
    does, and a second signal cannot cut that short. What is left is whole bundles only."""
    rows = 10
    count = FORK_WEIGHT // (rows + RUN_WEIGHT) + 4
    root, bundles = tmp_path / "out", tmp_path / "b"
    write_tree(root, [RunSpec(model=f"m-{n:03d}", rows=rows) for n in range(count)])
    later = tuple(f"m-{n:03d}_" for n in range(count // 2 + 2, count))  # the child's half

    def child_writing() -> bool:
        return any(path.parent.name.startswith(later) for path in partial_files(bundles))

    process = subprocess.Popen(
        [str(BUNDLER), "collect", str(root), "-o", str(bundles), "--expect", f"expert-vqa={rows}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env(),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not child_writing() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert child_writing(), "the child never started writing"
        if how.startswith("SIGTERM"):
            process.send_signal(signal.SIGTERM)
        else:
            os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == (143 if how.startswith("SIGTERM") else 130), stderr
    assert "nothing partial was left behind" in stderr
    assert [path for path in bundles.rglob("*") if is_temporary_name(path.name)] == []
    archives = sorted(bundles.rglob("*.tar.zst"))
    sidecars = [path.with_name(path.name.removesuffix(".tar.zst") + ".json") for path in archives]
    assert sorted(bundles.rglob("*.json")) == sidecars  # whole pairs, nothing else
    if archives:
        assert run_cli("verify", bundles).returncode == 0


def test_full_disk_while_replacing_keeps_the_previous_bundle(tmp_path: Path) -> None:
    """The new archive fails on its very last bytes: the previous pair stays intact and
    verifiable (issue 6: the sidecar used to be in place before the archive's last write)."""
    root = tmp_path / "out"
    big_dir = write_tree(
        root,
        [
            RunSpec(model="big", rows=300, thoughts_chars=4000),
            RunSpec(model="small", rows=1, thoughts_chars=10),
        ],
    )[0]
    bundles = tmp_path / "b"
    assert run_cli("collect", root, "-o", bundles).returncode == 0
    before = _bundle_files(bundles)
    (big_dir / "metrics.json").write_text('{"changed": {"n": 1}}')
    probe = json.loads(run_cli("collect", root, "-o", tmp_path / "probe", "--json").stdout)
    new_size = next(b["size"] for b in probe["bundles"] if b["bundle_id"].startswith("big_"))
    limit = limit_file_size(new_size - 1)
    result = run_cli_process("collect", root, "-o", bundles, "--json", preexec_fn=limit)
    assert result.returncode == 1, result.stderr
    (refusal,) = json.loads(result.stdout)["refused"]
    assert refusal["error"].endswith(".tar.zst: cannot write: file size limit exceeded")
    assert _bundle_files(bundles) == before
    assert partial_files(bundles) == []
    assert run_cli("verify", bundles).returncode == 0


def _bundle_files(bundles: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(bundles)): path.read_bytes()
        for path in all_files(bundles)
        if not path.name.endswith(".partial")
    }


def _start_collect(root: Path, bundles: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BUNDLER), "collect", str(root), "-o", str(bundles)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env(),
    )


def _temporary_appears(infix: str) -> Callable[[Path], bool]:
    """A temporary file whose name holds `infix` (".tar.zst." for the archive's, ".json." for
    the sidecar's) is in a player folder: the write is under way."""

    def seen(bundles: Path) -> bool:
        for folder in bundles.glob("*/"):
            with os.scandir(folder) as entries:
                if any(e.name.endswith(".partial") and infix in e.name for e in entries):
                    return True
        return False

    return seen


def _sidecar_replaced(bundles: Path) -> Callable[[Path], bool]:
    """The sidecar is gone or is another file than now: the commit is under way. (Until
    issue 6 the sidecar was replaced first, and the archive's fsync came after it.)"""
    (sidecar,) = bundles.glob("*/*.json")
    inode = sidecar.stat().st_ino

    def replaced(bundles: Path) -> bool:
        try:
            return sidecar.stat().st_ino != inode
        except FileNotFoundError:
            return True

    return replaced


def _wait_until(
    condition: Callable[[Path], bool], bundles: Path, process: subprocess.Popen[str]
) -> bool:
    """Poll without sleeping until `condition` holds, or the process ends."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if condition(bundles):
            return True
    return False


def _assert_a_good_pair_or_an_uncommitted_archive(
    bundles: Path, before: dict[str, bytes], after: dict[str, bytes]
) -> str:
    """What a kill may leave: the previous pair, the new pair (both verify), or an archive
    whose sidecar was not yet renamed into place; never a sidecar without its own archive."""
    (archive,) = [name for name in after if name.endswith(".tar.zst")]
    sidecar = archive.removesuffix(".tar.zst") + ".json"
    if sidecar not in after:
        return "uncommitted"
    verified = run_cli("verify", bundles / archive)
    assert verified.returncode == 0, verified.stderr
    if after[archive] == before.get(archive):
        assert after[sidecar] == before[sidecar]
        return "previous"
    return "new"


KILL_POINTS: list[tuple[str, float]] = [
    (".tar.zst.", 0.0),
    (".tar.zst.", 0.005),
    (".json.", 0.0),
    (".json.", 0.001),
    ("commit", 0.0),
    ("commit", 0.0002),
]


def _when(point: str, bundles: Path) -> Callable[[Path], bool]:
    return _sidecar_replaced(bundles) if point == "commit" else _temporary_appears(point)


def test_kill_9_at_any_moment_leaves_the_previous_bundle_or_the_new_one(tmp_path: Path) -> None:
    """kill -9 while the archive is written, while the sidecar is, and during the commit
    (issue 6); each time the files left verify, and the next collect recovers."""
    root = tmp_path / "out"
    run_dir = write_run(root, RunSpec(rows=1000, thoughts_chars=1500))
    bundles = tmp_path / "b"
    assert run_cli("collect", root, "-o", bundles).returncode == 0
    outcomes = []
    for version, (point, delay) in enumerate(KILL_POINTS):
        if not (bundles / _sidecar_name(bundles)).exists():
            assert run_cli("collect", root, "-o", bundles).returncode == 0  # commit it again
        before = _bundle_files(bundles)
        (run_dir / "metrics.json").write_text(json.dumps({"version": {"n": version}}))
        condition = _when(point, bundles)
        process = _start_collect(root, bundles)
        try:
            if _wait_until(condition, bundles, process):
                time.sleep(delay)
            process.kill()
        finally:
            process.wait()
        after = _bundle_files(bundles)
        outcomes.append(_assert_a_good_pair_or_an_uncommitted_archive(bundles, before, after))
    assert "previous" in outcomes, outcomes  # some kill did land mid-write
    # The next collect removes the leftovers of its killed predecessors and commits the bundle.
    left = _kill_while_writing_the_archive(root, run_dir, bundles)
    result = run_cli("collect", root, "-o", bundles, "--json")
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)["removed_temporaries"]) >= {str(path) for path in left}
    assert partial_files(bundles) == []
    assert len(_bundle_files(bundles)) == 2
    assert run_cli("verify", bundles).returncode == 0


def _kill_while_writing_the_archive(root: Path, run_dir: Path, bundles: Path) -> list[Path]:
    """kill -9 a collect frozen (SIGSTOP) while its archive's temporary file exists, until one
    such leftover is certainly there (a few tries: on a busy machine the write may end before
    the freeze). Each try changes the run, so there is always an archive to write: an
    unchanged run is skipped unread."""
    for attempt in range(10):
        (run_dir / "metrics.json").write_text(json.dumps({"attempt": {"n": attempt}}))
        process = _start_collect(root, bundles)
        try:
            if _wait_until(_temporary_appears(".tar.zst."), bundles, process):
                process.send_signal(signal.SIGSTOP)
        finally:
            process.kill()
            process.wait()
        if left := partial_files(bundles):
            return left
    raise AssertionError("collect was never caught writing its archive")


def _sidecar_name(bundles: Path) -> str:
    (archive,) = bundles.glob("*/*.tar.zst")
    return str(archive.relative_to(bundles)).removesuffix(".tar.zst") + ".json"


def test_sigterm_while_replacing_leaves_one_whole_pair_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    """SIGTERM is acted on at once while writing (nothing is left) and held during the commit
    (which then completes): never an archive without its sidecar, nor a stale one."""
    root = tmp_path / "out"
    run_dir = write_run(root, RunSpec(rows=1000, thoughts_chars=1500))
    bundles = tmp_path / "b"
    assert run_cli("collect", root, "-o", bundles).returncode == 0
    outcomes = []
    for version, point in enumerate((".tar.zst.", ".json.", "commit", "commit")):
        before = _bundle_files(bundles)
        (run_dir / "metrics.json").write_text(json.dumps({"version": {"n": version}}))
        condition = _when(point, bundles)
        process = _start_collect(root, bundles)
        try:
            _wait_until(condition, bundles, process)
            process.send_signal(signal.SIGTERM)
            # 143 when the handler ran, 0 when it came too late, -15 when it came while the
            # interpreter was exiting (its handlers are gone then): the files decide.
            assert process.wait(timeout=60) in (0, 143, -signal.SIGTERM)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert partial_files(bundles) == []
        after = _bundle_files(bundles)
        outcomes.append(_assert_a_good_pair_or_an_uncommitted_archive(bundles, before, after))
    assert "uncommitted" not in outcomes and "previous" in outcomes, outcomes


STOP_INSIDE_PYDANTIC = """
import signal, sys
import typer
from pydantic import BaseModel, field_serializer
from bundler.cli.errors import run_command

class Claim(BaseModel):
    name: str

    @field_serializer("name")
    def _stop_here(self, value: str) -> str:
        signal.raise_signal(getattr(signal, sys.argv[1]))  # lands mid-serialization
        return value

try:
    run_command(lambda: Claim(name="x").model_dump_json(), json_output=False, debug=False)
except typer.Exit as done:
    sys.exit(done.exit_code)
"""


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_stop_signal_that_a_library_wraps_still_reads_as_interrupted(
    name: str, code: int
) -> None:
    """pydantic's serializer turns the exception a signal handler raised while it called back
    into Python into a PydanticSerializationError; collect writing a manifest when SIGTERM came
    once exited 2 as an "internal error" (seen in CI)."""
    result = run_python(STOP_INSIDE_PYDANTIC, name)
    assert result.returncode == code
    assert result.stderr == "interrupted; nothing partial was left behind\n"


def test_sample_output_is_what_the_factory_writes(tmp_path: Path) -> None:
    write_sample_output(tmp_path / "sample")
    expected = {p.relative_to(tmp_path / "sample"): p.read_bytes() for p in all_files(tmp_path)}
    shipped = {p.relative_to(SAMPLE): p.read_bytes() for p in all_files(SAMPLE)}
    assert shipped == expected
    assert sum(len(data) for data in shipped.values()) < 100_000


def test_sample_output_collects_and_verifies(tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    result = run_cli("collect", SAMPLE, "-o", bundles, *SAMPLE_EXPECT, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert sorted(
        b["bundle_id"].split("_")[0] + " " + b["coverage"] for b in report["bundles"]
    ) == [
        "gpt-5-2 complete",
        "gpt-5-2 complete",
        "qwen-qwen3-5-27b complete",
    ]
    assert any(b["bundle_id"].endswith("maze-solve@unpinned") for b in report["bundles"])
    assert [item["reason"] for item in report["skipped"]] == ["not a dataset-backed target"]
    verified = run_cli("verify", bundles)
    assert verified.returncode == 0, verified.stderr
    assert not list(SAMPLE.rglob("*.partial")) and not (SAMPLE / "bundles").exists()


STOP_AFTER_THE_WORK = """
import os, signal, sys, time
from bundler.cli.errors import run_command
run_command(lambda: 0, json_output=False, debug=False)
os.kill(os.getpid(), getattr(signal, sys.argv[1]))
time.sleep(5)
print("still running")
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_after_the_work_ends_the_process_as_the_signal_does(name: str) -> None:
    """A sync that has published and said so, then gets SIGTERM while Python exits, exited 1
    with a traceback: a person was asked to look at a run that went well."""
    result = run_python(STOP_AFTER_THE_WORK, name)
    assert result.returncode == -getattr(signal, name)  # ended by the signal: 128 + N in a shell
    assert result.stdout == "" and result.stderr == ""


def test_a_stop_just_after_a_temporary_file_is_made_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    """Python acts on a signal between two steps of the code: one came after collect made a
    staged archive and before its code held the file to remove it, and "nothing partial was
    left behind" left a `.partial` file (seen in CI, Ctrl-C while a forked child wrote)."""
    from bundler.cli.errors import run_command
    from bundler.local.fileio import StagedFile

    def action() -> None:
        StagedFile(tmp_path / "p_0123abcd" / "t@unpinned.tar.zst")  # made, held by no one
        signal.raise_signal(signal.SIGINT)

    with pytest.raises(typer.Exit) as stopped:
        run_command(action, json_output=False, debug=False)
    assert stopped.value.exit_code == 130
    assert [path for path in tmp_path.rglob("*") if path.is_file()] == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_dropped_in_a_finalizer_still_ends_the_command_as_stopped() -> None:
    """Python drops an exception raised in `__del__` (it prints "Exception ignored"): a SIGINT
    that lands while a temporary file is finalized must not let the command end as done."""
    from bundler.cli.errors import run_command

    class Finalized:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)

    def action() -> str:
        Finalized()  # finalized at once: its handler's KeyboardInterrupt is dropped
        return "done"

    with pytest.raises(typer.Exit) as stopped:
        run_command(action, json_output=False, debug=False)
    assert stopped.value.exit_code == 130
    assert run_command(lambda: "done", json_output=False, debug=False) == "done"
