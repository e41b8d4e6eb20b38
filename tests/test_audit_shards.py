"""`bundler audit --shard I/N` and `--merge`, end to end against the local Hub server: the
shards of a board with problems planted in each cover every bundle id exactly once, and their
merged reports give the whole audit's findings, in its order, with its exit code; a missing
shard makes the verdict incomplete (exit 1, never clean); reports of another commit, shard
count or a file that is no shard's report are refused in one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factory import RunSpec
from helpers import one_line_error, run_cli
from hubserver import HubServer
from test_audit import audit, forged_score, table, with_rows
from test_board_derived import delete_by_hand
from test_card_refresh import commit_by_hand
from test_upload import make_bundles, publish

from bundler.hub.audit.shards import Shard, owner
from bundler.hub.repo.paths import repo_archive, table_part
from bundler.local.layout import BundleId

SHARDS = 3


@pytest.fixture
def board(repo_id: str, tmp_path: Path) -> Path:
    """Eight bundles over two tasks, as uploads leave them."""
    specs = [
        RunSpec(task=task, model=f"m{n}", rows=2) for task in ("alpha", "beta") for n in range(4)
    ]
    publish(bundles := make_bundles(tmp_path / "board", specs), repo_id)
    return bundles


def head(hub: HubServer, repo_id: str) -> str:
    return hub.commits(repo_id)[0].oid


def shard_reports(
    repo_id: str, commit: str, folder: Path, count: int = SHARDS, skip: tuple[int, ...] = ()
) -> list[Path]:
    """Each shard run as a runner of a CI matrix runs it, its --json report kept in a file."""
    folder.mkdir(exist_ok=True)
    written = []
    for index in range(1, count + 1):
        if index in skip:
            continue
        code, report, stderr = audit(repo_id, "--revision", commit, "--shard", f"{index}/{count}")
        assert code in (0, 1), stderr
        assert report["shard"]["index"] == index and report["commit"] == commit
        assert f"shard {index} of {count}: covered" in stderr
        path = folder / f"audit-{index}.json"
        path.write_text(json.dumps(report))
        written.append(path)
    return written


def merged(*reports: Path) -> tuple[int, dict[str, Any], str]:
    result = run_cli("audit", "--merge", *reports, "--json", env={"HF_TOKEN": ""})
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def spread(ids: list[str], roles: int) -> list[str]:
    """`roles` of `ids`, taken from each shard in turn, so the problems fall in every shard."""
    by_shard = sorted(ids, key=lambda i: (owner(i, SHARDS), i))
    rounds: dict[int, list[str]] = {}
    for bundle_id in by_shard:
        rounds.setdefault(owner(bundle_id, SHARDS), []).append(bundle_id)
    order = [ids for _, ids in sorted(rounds.items())]
    picked = [row[n] for n in range(max(map(len, order))) for row in order if n < len(row)]
    return picked[:roles]


def ghost_in(shard: int) -> str:
    """A bundle id no bundle has, covered by `shard`."""
    return next(
        ghost
        for n in range(1000)
        if owner(ghost := f"ghost{n}_00000000/alpha@unpinned", SHARDS) == shard
    )


def plant_problems(hub: HubServer, repo_id: str) -> dict[str, str]:
    """In one commit of the parts and one deletion: a consistent forgery, a changed field, a
    bundle left off, a ghost row, a row held twice, a row whose archive is gone; spread over
    the shards. Returns the bundle id of each problem."""
    original = table(hub, repo_id)
    rows = {str(row["bundle_id"]): row for row in original.to_pylist()}
    forged, changed, left_off, twice, gone = spread(sorted(rows), 5)
    ghost = ghost_in(owner(forged, SHARDS) % SHARDS + 1)
    edited = dict(rows)
    edited[forged] = forged_score(rows[forged], 0.99)
    edited[changed] = rows[changed] | {"input_tokens": int(rows[changed]["input_tokens"]) + 1}
    del edited[left_off]
    edited[ghost] = dict(rows[twice], bundle_id=ghost, player_name="ghost")
    parts = {
        table_part(0): with_rows(original, sorted(edited.values(), key=lambda r: r["bundle_id"])),
        table_part(1): with_rows(original, [rows[twice]]),
    }
    commit_by_hand(repo_id, parts)
    delete_by_hand(repo_id, repo_archive(BundleId.parse(gone)))
    return {"forged": forged, "changed": changed, "left_off": left_off, "ghost": ghost} | {
        "twice": twice,
        "gone": gone,
    }


def test_the_shards_cover_every_bundle_once_and_merge_into_the_whole_audit(
    hub: HubServer, repo_id: str, board: Path, tmp_path: Path
) -> None:
    planted = plant_problems(hub, repo_id)
    assert len({owner(i, SHARDS) for i in planted.values()}) == SHARDS
    commit = head(hub, repo_id)
    code, whole, _ = audit(repo_id)
    assert code == 1
    kinds = {f["kind"] for f in whole["findings"]}
    assert {"field-differs", "unsupported-row", "missing-from-board", "duplicate-row"} <= kinds
    assert "task-table-differs" in kinds and "card-differs" in kinds

    reports = shard_reports(repo_id, commit, tmp_path / "reports")
    shards = [json.loads(path.read_text()) for path in reports]
    covered = [set(report["shard"]["covered"]) for report in shards]
    every = set().union(*covered)
    assert sum(map(len, covered)) == len(every) == shards[0]["shard"]["ids_total"]
    assert every == {b["bundle_id"] for b in whole["audited"]} | {planted["ghost"], planted["gone"]}
    for report, ids in zip(shards, covered, strict=True):
        assert {b["bundle_id"] for b in report["audited"]} <= ids
        assert {f["bundle_id"] for f in report["findings"]} <= ids
        # the board-wide findings are the merge's, not a shard's
        assert not {f["kind"] for f in report["findings"]} & {
            "duplicate-row", "task-table-differs", "card-differs", "chart-differs",
        }  # fmt: skip
    assert all(report["findings"] for report in shards)  # a problem in every shard

    hub.reset_requests()
    code, verdict, stderr = merged(*reports)
    assert code == 1, stderr
    assert verdict["findings"] == whole["findings"]  # the same findings, in the same order
    assert [b["bundle_id"] for b in verdict["audited"]] == [
        b["bundle_id"] for b in whole["audited"]
    ]
    assert verdict["merge"] == {
        "count": SHARDS,
        "merged": [1, 2, 3],
        "missing": [],
        "reports": [str(path) for path in reports],
    }
    assert verdict["commit"] == commit and verdict["shard"] is None
    assert f"merged the reports of {SHARDS} of {SHARDS} shard(s)" in stderr
    # the merge reads the parts (their copies kept on this machine) and lists the board
    assert hub.request_counts(repo_id)["file"] <= 2

    # each problem is found by the shard that covers it
    by_shard = {report["shard"]["index"]: report for report in shards}
    for role, bundle_id in planted.items():
        if role == "twice":
            continue  # a row held twice is the parts' finding: the merge's
        found = {f["bundle_id"] for f in by_shard[owner(bundle_id, SHARDS)]["findings"]}
        assert bundle_id in found, role


def test_a_clean_board_merges_clean_and_a_missing_shard_is_never_clean(
    hub: HubServer, repo_id: str, board: Path, tmp_path: Path
) -> None:
    commit = head(hub, repo_id)
    reports = shard_reports(repo_id, commit, tmp_path / "all")
    code, verdict, stderr = merged(*reports)
    assert code == 0, stderr
    assert verdict["findings"] == [] and verdict["merge"]["missing"] == []
    assert "clean" in stderr
    hub.reset_requests()
    code, verdict, stderr = merged(reports[0], reports[2])
    assert code == 1, stderr
    assert verdict["findings"] == [] and verdict["merge"]["missing"] == [2]
    assert "incomplete: no report of shard(s) 2 of 3" in stderr and "clean" not in stderr
    assert any("shard(s) 2 of 3: no report" in note for note in verdict["unchecked"])
    assert hub.request_counts(repo_id) == {"api": 0, "file": 0, "storage": 0}
    human = run_cli("audit", "--merge", reports[0], reports[2])
    assert human.returncode == 1 and "incomplete" in human.stderr


def test_one_shard_is_the_whole_audit(hub: HubServer, repo_id: str, board: Path) -> None:
    code, whole, _ = audit(repo_id)
    code_1, one, stderr = audit(repo_id, "--shard", "1/1")
    assert code == code_1 == 0, stderr
    assert len(one["shard"]["covered"]) == one["shard"]["ids_total"] == 8
    assert one["findings"] == whole["findings"] == []


def test_reports_of_another_commit_or_count_and_duplicates_are_refused(
    hub: HubServer, repo_id: str, board: Path, tmp_path: Path
) -> None:
    before = head(hub, repo_id)
    first = shard_reports(repo_id, before, tmp_path / "a", count=2)
    commit_by_hand(repo_id, {"notes.txt": b"a later commit"})
    later = shard_reports(repo_id, head(hub, repo_id), tmp_path / "b", count=2)
    code, error, stderr = merged(first[0], later[1])
    assert code == 2 and error["kind"] == "error"
    assert one_line_error(stderr).startswith(f"error: {later[1]}: shard 2 audited {repo_id} at")
    assert "same commit sha" in stderr
    three = shard_reports(repo_id, before, tmp_path / "c", skip=(2, 3))
    code, _, stderr = merged(first[0], three[0])
    assert code == 2
    assert one_line_error(stderr) == f"error: {three[0]}: a shard of 3; {first[0]}: a shard of 2"
    code, _, stderr = merged(first[0], first[1], first[0])
    assert code == 2
    assert one_line_error(stderr) == (f"error: {first[0]}: shard 1 again ({first[0]} is shard 1)")


def test_a_file_that_is_no_shard_report_is_refused_in_one_line(
    hub: HubServer, repo_id: str, board: Path, tmp_path: Path
) -> None:
    (good,) = shard_reports(repo_id, head(hub, repo_id), tmp_path, count=1)
    report = json.loads(good.read_text())
    cases = {
        "text.json": (b"not json", "not a JSON report: Invalid JSON"),
        "deep.json": (b"[" * 100_000 + b"]" * 100_000, "not a JSON report"),
        "list.json": (b"[1, 2]", "not a JSON report: Input should be an object"),
        "other.json": (json.dumps({"kind": "verify"}).encode(), "a report of 'verify'"),
        "whole.json": (
            json.dumps(report | {"shard": None}).encode(),
            "the report of a whole audit, not of one shard",
        ),
        "shard0.json": (
            json.dumps(report | {"shard": report["shard"] | {"index": 0}}).encode(),
            "shard 0 of 1: no such shard",
        ),
        "stray.json": (
            json.dumps(
                report | {"shard": report["shard"] | {"count": 2, "covered": ["a", "b", "c"]}}
            ).encode(),
            "covers",
        ),
        "beyond.json": (
            json.dumps(report | {"shard": report["shard"] | {"unsupported": ["x"]}}).encode(),
            "judges the row of 'x', which it does not cover",
        ),
        "bad.json": (
            json.dumps(report | {"findings": [{"kind": "nothing"}]}).encode(),
            "not an audit's report: findings.0.kind",
        ),
    }
    for name, (data, problem) in cases.items():
        (path := tmp_path / name).write_bytes(data)
        code, error, stderr = merged(path)
        assert code == 2, (name, stderr)
        line = one_line_error(stderr)
        assert line.startswith(f"error: {path}: ") and problem in line, (name, line)
        assert len(line) < 400 and error["exit_code"] == 2
    older = tmp_path / "older.json"
    older.write_text(json.dumps(report | {"shard": report["shard"] | {"bundler_version": "0.0.1"}}))
    code, _, stderr = merged(older)
    assert code == 2
    assert one_line_error(stderr).startswith(f"error: {older}: made by bundler 0.0.1, not ")
    huge = tmp_path / "huge.json"
    with huge.open("wb") as file:
        file.truncate(65 << 20)  # sparse: no disk, and never read
    code, _, stderr = merged(huge)
    assert code == 2 and "larger than" in one_line_error(stderr)


def test_a_shard_that_ended_on_an_error_is_missing(
    hub: HubServer, repo_id: str, board: Path, tmp_path: Path
) -> None:
    reports = shard_reports(repo_id, head(hub, repo_id), tmp_path, count=2, skip=(2,))
    failed = tmp_path / "audit-2.json"
    failed.write_text(
        json.dumps({"kind": "error", "error": "rate limit", "hint": None, "exit_code": 75})
    )
    code, verdict, stderr = merged(*reports, failed)
    assert code == 1 and verdict["merge"]["missing"] == [2]
    assert any(
        note.startswith(f"{failed}: no report: the shard ended on an error (exit 75)")
        for note in verdict["unchecked"]
    )
    code, _, stderr = merged(failed)
    assert code == 2 and "no shard's report among 1 file(s)" in one_line_error(stderr)


@pytest.mark.parametrize("value", ["0/3", "4/3", "1/0", "x", "1/", "-1/2"])
def test_a_shard_that_does_not_exist_is_a_usage_error(value: str) -> None:
    result = run_cli("audit", "--repo", "o/n", "--shard", value)
    assert result.returncode == 2
    assert "--shard" in result.stderr and "I/N" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--repo", "o/n", "--shard", "1/2", "--sample", "3"],
        ["--merge"],
        ["--merge", "--repo", "o/n", "r.json"],
        ["--merge", "--revision", "abc", "r.json"],
        ["r.json"],
        [],
    ],
)
def test_what_cannot_be_combined_is_a_usage_error(args: list[str]) -> None:
    result = run_cli("audit", *args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr


def test_ownership_is_stable_and_even() -> None:
    ids = [f"p{n}_00000000/alpha@unpinned" for n in range(8000)]
    counts = [sum(Shard(i, 8).owns(b) for b in ids) for i in range(1, 9)]
    assert sum(counts) == 8000 and max(counts) - min(counts) < 200
    assert owner(ids[0], 8) == owner(ids[0], 8)
    with pytest.raises(ValueError):
        Shard(0, 8)
