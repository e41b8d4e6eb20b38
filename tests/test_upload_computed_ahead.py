"""The last commit of an upload takes the tables and card computed ahead with the commit before
it (bundler.hub.publish.holdings, `Holdings.table_operations`), when it is planned on that
commit: they are computed from the very branch it is made on, but for the head, which only the
record names. So an upload of two commits computes its tables twice, not three times, and
leaves the branch exactly as computing them again would (a `card` run finds nothing to do);
on any other head, or once the Hub refused the first commit's card, they are computed again."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

from conftest import WRITE_TOKEN
from helpers import run_cli
from hubserver import RACE, Fault, HubServer
from test_upload import make_bundles
from test_upload_ahead import FORTY

from bundler.hub.leaderboard.branch import BranchTables
from bundler.hub.leaderboard.record import BoardRecord
from bundler.hub.publish.upload import UploadOptions, UploadReport
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import README, RECORD


def upload_counting(bundles: Path, repo_id: str) -> tuple[UploadReport, int]:
    """Upload `bundles` with the library, counting the computings of a commit's tables."""
    with mock.patch.object(
        BranchTables, "change", autospec=True, side_effect=BranchTables.change
    ) as computing:
        report = upload_library(bundles, UploadOptions(repo_id=repo_id, token=WRITE_TOKEN))
    return report, computing.call_count


def nothing_to_do(repo_id: str) -> bool:
    """`bundler card` finds the tables, card and record as computing them again gives."""
    result = run_cli("card", "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["changed"] is False


def test_the_last_commit_takes_what_was_computed_ahead(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    hub.create_repo(repo_id)
    report, computed = upload_counting(make_bundles(tmp_path, FORTY), repo_id)
    assert report.exit_code == 0 and len(report.commits) == 2, report.error
    assert computed == 2  # the first commit's, and the second's ahead
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and record.parent == report.commits[0]
    assert README in hub.list_files(repo_id)
    assert nothing_to_do(repo_id)


def test_on_another_head_the_last_commit_computes_its_tables_again(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Someone commits between our two, just as our second is sent (planned on our first, it
    took what was computed ahead): the Hub refuses it, and planned again on their head it
    computes its tables again."""
    hub.create_repo(repo_id)
    hub.inject("POST", rf"{repo_id}/commit/main$", RACE, times=1, after=1)
    report, computed = upload_counting(make_bundles(tmp_path, FORTY), repo_id)
    assert report.exit_code == 0 and len(report.commits) == 2, report.error
    assert computed == 3  # the first's, the second's ahead, and the second's on their head
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and record.parent != report.commits[0]
    assert nothing_to_do(repo_id)


def test_once_the_first_commits_card_was_refused_the_last_computes_its_tables_again(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The branch then holds no card where the change computed ahead thought it would."""
    hub.create_repo(repo_id)
    hub.inject("POST", r"/api/validate-yaml", Fault.status(400), times=1)
    report, computed = upload_counting(make_bundles(tmp_path, FORTY), repo_id)
    assert len(report.commits) == 2 and report.card_refused
    assert computed == 3
    assert README not in hub.list_files(repo_id)
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and record.parent == report.commits[0]
