"""helpers.run_cli runs the command in the tests' own process: what it gives must read as what
the installed console script gives in a process of its own (run_cli_process), and it must leave
the tests' process as it found it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from factory import RunSpec, write_run
from helpers import run_cli, run_cli_process

from bundler.local.collect import CollectOptions, collect


def test_the_command_reads_the_same_in_this_process_and_in_its_own(tmp_path: Path) -> None:
    """Exit codes, stdout and stderr alike: help at a CI log's width and at COLUMNS, a usage
    error, an error as one line and as JSON, rich's tables, a path that is not UTF-8."""
    bundles = tmp_path / os.fsdecode(b"bundles-\xff")
    write_run(tmp_path / "out", RunSpec(rows=2))
    assert not collect(tmp_path / "out", bundles, CollectOptions(allow_partial=True)).refused
    (archive,) = bundles.rglob("*.tar.zst")
    cases: list[tuple[tuple[object, ...], dict[str, str] | None]] = [
        (("--help",), None),
        (("collect", "--help"), {"COLUMNS": "100"}),
        (("frobnicate",), None),
        (("verify", tmp_path / "nope", "--json"), None),
        (("verify", bundles), None),
        (("verify", bundles, "--json"), None),
        (("inspect", archive), None),
    ]
    for args, env in cases:
        here, there = run_cli(*args, env=env), run_cli_process(*args, env=env)
        assert (here.returncode, here.stdout, here.stderr) == (
            there.returncode,
            there.stdout,
            there.stderr,
        ), args


def test_a_command_leaves_this_process_as_it_found_it(tmp_path: Path) -> None:
    environ, cwd = dict(os.environ), os.getcwd()
    streams = sys.stdin, sys.stdout, sys.stderr
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    result = run_cli("collect", "-o", "b", env={"BUNDLER_SUBMITTER_NAME": "Ada"}, cwd=tmp_path)
    assert result.returncode == 2 and "output root does not exist" in result.stderr
    assert dict(os.environ) == environ and os.getcwd() == cwd
    assert (sys.stdin, sys.stdout, sys.stderr) == streams
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_what_needs_a_process_of_its_own_is_refused() -> None:
    with pytest.raises(TypeError, match="run_cli_process"):
        run_cli("--help", preexec_fn=lambda: None)
    with pytest.raises(ValueError, match="run_cli_process"):
        run_cli("--help", env={"HF_HOME": "/elsewhere"})
