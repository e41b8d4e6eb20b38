"""Smoke tests of the benchmark scripts: each runs once at a tiny size and writes its JSON.

Timings are not asserted (speed is measured by the scripts, not by the suite); what is asserted
is that every row ran on both sides and reported the figures the README quotes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def run_benchmark(script: str, tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, str(TESTS / script), "--rounds", "1", "--json-out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    figures: dict[str, object] = json.loads(out.read_text())
    return figures


def check_rows(figures: dict[str, object], names: set[str]) -> None:
    comparisons = figures["comparisons"]
    assert isinstance(comparisons, list)
    assert {row["name"] for row in comparisons} == names
    for row in comparisons:
        assert len(row["subject_seconds"]) == len(row["baseline_seconds"]) >= 1
        assert row["ratio_of_medians"] > 0 and row["subject_peak_rss_kib"] > 0
        low, high = row["spread"]
        assert low <= row["ratio_of_medians"] <= high or low == high


@pytest.mark.slow
def test_collect_benchmark_runs_every_row(tmp_path: Path) -> None:
    figures = run_benchmark(
        "benchmark_collect.py",
        tmp_path,
        *("--rows", "60", "--large-rows", "80", "--runs", "3", "--run-rows", "4"),
    )
    check_rows(
        figures,
        {
            "realistic-60",
            "realistic-60-floor",
            "realistic-80",
            "own-writer-60",
            "runs-3x4",
            "runs-3x4-floor",
        },
    )
    comparisons = figures["comparisons"]
    assert isinstance(comparisons, list)
    targets = {row["name"]: (row["target_ratio"], row["target_difference"]) for row in comparisons}
    assert targets == {  # the goals, which each row's "met" is measured against
        "realistic-60": (2.0, None),
        "realistic-60-floor": (1.3, None),
        "realistic-80": (1.5, None),
        "own-writer-60": (None, None),
        "runs-3x4": (3.0, None),
        "runs-3x4-floor": (1.3, None),
    }


@pytest.mark.slow
def test_startup_benchmark_runs_every_row(tmp_path: Path) -> None:
    figures = run_benchmark("benchmark_startup.py", tmp_path)
    check_rows(figures, {"help", "version", "collect-empty"})
    comparisons = figures["comparisons"]
    assert isinstance(comparisons, list)
    for row in comparisons:
        assert row["target_difference"] == 0.030  # the goal: within 30 ms of bare typer
        assert row["extra"]["bare_peak_rss_mib"] > 0 and row["extra"]["cpu_ms"] > 0


@pytest.mark.slow
def test_verify_benchmark_runs_every_row(tmp_path: Path) -> None:
    figures = run_benchmark(
        "benchmark_verify.py",
        tmp_path,
        "--rows",
        "40",
        "--read-ahead-rows",
        "50",
        "--large-rows",
        "60",
    )
    rows = {"verify-40", "verify-signed-40", "verify-50", "verify-60", "verify-signed-60"}
    check_rows(figures, rows | {"verify-40-floor", "verify-60-floor"})
    by_name = {row["name"]: row for row in figures["comparisons"]}  # type: ignore[attr-defined]
    assert list(by_name) == [  # by size; a size between has neither floor nor signed copy
        "verify-40",
        "verify-40-floor",
        "verify-signed-40",
        "verify-50",
        "verify-60",
        "verify-60-floor",
        "verify-signed-60",
    ]
    for name, row in by_name.items():  # tiny bundles, read in line: the thread measured forced
        assert name.endswith("-floor") or row["extra"]["read_ahead_unused"] is True
        goal = None if name.endswith("-floor") or name == "verify-50" else 1.5  # the issue's
        assert row["target_ratio"] == goal, name
    for rows_in in (40, 60):  # the floor is a row of its own: its own rounds of verify
        floor = by_name[f"verify-{rows_in}-floor"]
        assert floor["baseline"] == "the pipeline, the bundler's libraries loaded"
        assert floor["subject_seconds"] != by_name[f"verify-{rows_in}"]["subject_seconds"]


@pytest.mark.slow
def test_upload_benchmark_counts_requests(tmp_path: Path) -> None:
    figures = run_benchmark("benchmark_upload.py", tmp_path, "--bundles", "3", "--rows", "5")
    check_rows(figures, {"upload-fresh", "upload-fresh-floor", "upload-rerun"})
    fresh, floor, _ = figures["comparisons"]  # type: ignore[misc]
    assert fresh["extra"]["requests"] > 0 and fresh["extra"]["hf_requests"] > 0
    # the floor is hf upload once the bundler's libraries are loaded, against the same rounds
    assert floor["subject_seconds"] == fresh["subject_seconds"]
    assert floor["baseline_seconds"] != fresh["baseline_seconds"]
    assert floor["extra"]["floor_requests"] > 0  # it did upload, into a repository of its own
    assert {"kept_rows", "computed_ahead"} <= fresh["extra"].keys()


@pytest.mark.slow
def test_nightly_benchmark_times_the_noop(tmp_path: Path) -> None:
    figures = run_benchmark("benchmark_nightly.py", tmp_path, "--smoke", "--full-rounds", "1")
    check_rows(figures, {"noop-collect", "noop-gather", "full-collect", "noop-sync"})
    comparisons = figures["comparisons"]
    assert isinstance(comparisons, list)
    targets = {row["name"]: row["target_ratio"] for row in comparisons}
    assert targets == {
        "noop-collect": 1.5,
        "noop-gather": 1.5,
        "full-collect": None,
        "noop-sync": 1.5,
    }
    for row in comparisons:  # each no-op's floor, a figure a round
        floors = row["extra"].get("floor_seconds_per_added_run")
        assert (floors is not None) == row["name"].startswith("noop-"), row["name"]
        assert floors is None or len(floors) == len(row["subject_seconds"])
    sync = next(row for row in comparisons if row["name"] == "noop-sync")
    assert 0 < sync["extra"]["hub_requests_per_sync"]["large"] <= 6  # plans against the tables
    assert sync["extra"]["discover_ahead_large"] > 0 and sync["extra"]["discover_ahead_small"] > 0


@pytest.mark.slow
def test_scale_benchmark_measures_every_command_at_each_size(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    result = subprocess.run(
        [
            sys.executable,
            str(TESTS / "benchmark_scale.py"),
            *("--sizes", "10", "20", "--bulk", "3", "--json-out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    commands = {row["name"]: row for row in json.loads(out.read_text())["commands"]}
    assert set(commands) == {
        "upload 1 new",
        "upload --create-pr 1 new (submitter)",
        "review a 1-bundle PR",
        "card after a web-page merge of 1",
        "upload 3 new (bulk)",
    }
    for name, row in commands.items():
        assert set(row["by_size"]) == {"10", "20"}, name
        for figures in row["by_size"].values():
            assert figures["exit_code"] == 0, (name, figures.get("why"))
            assert figures["requests"] > 0 and figures["received_kib"] > 0, name
            assert figures["peak_rss_mib"] > 20 and figures["seconds"] > 0, name
        assert set(row["growth"]["20"]) == {
            "requests",
            "sent_kib",
            "received_kib",
            "peak_rss_mib",
            "seconds",
            "own_seconds",
        }
    for name in ("upload 1 new", "upload 3 new (bulk)", "card after a web-page merge of 1"):
        for figures in commands[name]["by_size"].values():
            assert figures["sent_kib"] > 1, name  # each commits: what it sent is counted
    bulk = commands["upload 3 new (bulk)"]["by_size"]["10"]
    assert bulk["commits"] >= 1 and bulk["storage"] >= 3  # an LFS object per archive


@pytest.mark.slow
def test_audit_shards_benchmark_measures_each_spread_and_computes_the_large_board(
    tmp_path: Path,
) -> None:
    out = tmp_path / "shards.json"
    result = subprocess.run(
        [
            sys.executable,
            str(TESTS / "benchmark_audit_shards.py"),
            *("--size", "12", "--runners", "1", "2", "--json-out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    measured = figures["measured"]
    assert measured["whole"]["exit_code"] == 0 and measured["whole"]["file"] >= 2 * 12
    assert [run["runners"] for run in measured["runs"]] == [1, 2]
    for run in measured["runs"]:
        assert sum(shard["covered"] for shard in run["shards"]) == 12
        assert run["merge"]["exit_code"] == 0
    assert measured["per_bundle"]["file_per_bundle"] == 2.0
    assert [row["runners"] for row in figures["computed_100000"]] == [1, 8, 32]
    hours = [row["hours"] for row in figures["computed_100000"]]
    assert hours[0] > hours[1] > hours[2] > 0


def test_charts_benchmark_reports_each_figure(tmp_path: Path) -> None:
    figures = run_benchmark("benchmark_charts.py", tmp_path, "--charts", "2", "--entries", "30")
    for name in ("import_seconds", "first_chart_seconds", "later_chart_seconds"):
        spread = figures[name]
        assert isinstance(spread, dict)
        assert 0 < spread["low"] <= spread["median"] <= spread["high"], name
    assert isinstance(figures["png_bytes"], int) and figures["png_bytes"] > 1000
    assert isinstance(figures["peak_rss_kib"], int) and figures["peak_rss_kib"] > 0


def test_the_suite_needs_nothing_beside_the_clone() -> None:
    """The README's test command passes on a clone with nothing beside it: no test or module
    reaches for a folder outside the checkout."""
    import re

    word = "sha" + "red"  # spelled apart, so this test's own source passes its check
    outside = re.compile(rf"\.\./{word}|{word}/tools|\"{word}\"")
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{number}"
        for folder in (TESTS, TESTS.parent / "bundler")
        for path in sorted(folder.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if outside.search(line)
    ]
    assert offenders == []


def tar_members_after_the_manifest(archive: Path) -> bytes:
    """The tar bytes of every member after the first (the manifest), headers and padding
    included, up to the end-of-archive blocks."""
    import io
    import tarfile

    import zstandard

    data = zstandard.ZstdDecompressor().stream_reader(archive.read_bytes()).read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = tar.getmembers()
    assert members[0].name == "manifest.json"
    last = members[-1]
    return data[members[1].offset : last.offset_data + last.size + -last.size % 512]


def test_the_durable_floor_writes_the_bundler_s_members(tmp_path: Path) -> None:
    """The durable floor (benchmark_collect.DURABLE_FLOOR) must write what collect writes, or
    the bundler's ratio to it says nothing: after the manifest, every member of each of its
    archives is byte for byte one of collect's, and it writes one per run, small runs and a
    run large enough to be compressed by worker threads alike."""
    from benchmark_collect import DURABLE_FLOOR
    from factory import RunSpec, write_tree

    from bundler.local.archive import THREADED_BODY_PREDICTIONS
    from bundler.local.collect import CollectOptions, collect

    root = tmp_path / "out"
    specs = [RunSpec(model=f"m-{n}", rows=3 + n) for n in range(2)]
    specs.append(RunSpec(model="m-large", rows=THREADED_BODY_PREDICTIONS))
    write_tree(root, specs, how_do_you=False)
    report = collect(root, tmp_path / "bundles", CollectOptions(allow_partial=True))
    assert len(report.bundles) == 3 and not report.refused
    script = tmp_path / "floor.py"
    script.write_text(DURABLE_FLOOR, encoding="utf-8")
    subprocess.run(
        [sys.executable, str(script), str(root), str(tmp_path / "floor")], check=True, timeout=60
    )
    ours = sorted(tar_members_after_the_manifest(Path(b.archive)) for b in report.bundles)
    floors = sorted((tmp_path / "floor").glob("run-*/run.tar.zst"))
    assert len(floors) == 3 and not list((tmp_path / "floor").rglob("*.tmp"))
    assert sorted(tar_members_after_the_manifest(archive) for archive in floors) == ours
