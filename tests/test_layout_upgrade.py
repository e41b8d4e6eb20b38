"""A repository in layout 2 (player folders right under `bundles/`), as the previous release
wrote it, is upgraded to layout 3 (`bundles/<shard>/<player>/`, bundler.hub.repo.paths) by the
next commit of the bundler: every bundle verified and moved into its shard, its archive copied
on the Hub (never uploaded again), its sidecar written from the verified bytes, nothing left at
the old paths. A bundle that fails verification stays where it is and is named; a commit that
writes a bundle anew removes its old copy rather than move it over the new one; a pull request
is merged only into a branch whose copy of its bundles the review compared it with.

tests/fixtures/layout-v2 holds the tables, record and card that the previous release (00425a9)
committed when it published tests/fixtures/layout-v1's three bundles to the test server; those
bundles it kept where layout-v1 has them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from conftest import OTHER_SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import CommitRecord, HubServer
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from test_card_refresh import LAYOUT_1, card, commit_by_hand
from test_download import download
from test_review import make_world, propose, review
from test_tasks_list import VQA
from test_upload import make_bundles, publish, repo_files, table_rows, upload
from test_upload_extends import partial_bundles

from bundler.hub.repo.paths import (
    ALL_TABLE,
    BUNDLES_DIR,
    README,
    RECORD,
    TABLES_DIR,
    bundle_of_path,
    repo_paths,
    task_chart,
    unsharded_bundle_of,
    unsharded_paths,
)
from bundler.local.layout import BundleId, id_of_local_archive

LAYOUT_2 = Path(__file__).parent / "fixtures" / "layout-v2"


def layout_2_files() -> dict[str, bytes]:
    """The repository as the previous release left it: layout-v1's bundles, layout-v2's
    tables, record and card."""
    files = {}
    for root, below in ((LAYOUT_1, (BUNDLES_DIR,)), (LAYOUT_2, (README, TABLES_DIR))):
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and relative.startswith(below):
                files[relative] = path.read_bytes()
    return files


def old_bundles(files: dict[str, bytes]) -> dict[BundleId, tuple[bytes, bytes]]:
    """The bundles of a layout-2 repository's files, with their archive's and sidecar's bytes."""
    found = {bundle for path in files if (bundle := unsharded_bundle_of(path)) is not None}
    return {
        bundle: (files[unsharded_paths(bundle)[0]], files[unsharded_paths(bundle)[1]])
        for bundle in found
    }


def moved(bundles: dict[BundleId, tuple[bytes, bytes]]) -> dict[str, bytes]:
    """Those bundles' files where layout 3 keeps them."""
    return {
        path: data
        for bundle, both in bundles.items()
        for path, data in zip(repo_paths(bundle), both, strict=True)
    }


def as_layout_2(bundles: dict[str, bytes]) -> dict[str, bytes]:
    """Bundles' files (by their layout-3 paths) where layout 2 kept them."""
    return {
        unsharded_paths(bundle)[repo_paths(bundle).index(path)]: data
        for path, data in bundles.items()
        if (bundle := bundle_of_path(path)) is not None
    }


def held_bundles(hub: HubServer, repo_id: str) -> dict[str, bytes | None]:
    """Every file under the repository's `bundles/`."""
    paths = [p for p in hub.list_files(repo_id) if p.startswith(f"{BUNDLES_DIR}/")]
    return {path: hub.file_bytes(repo_id, path) for path in paths}


def archive_sha256(bundles: Path) -> str:
    """The sha256 of the one archive of a local bundles folder."""
    (archive,) = bundles.rglob("*.tar.zst")
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def lfs_uploads(hub: HubServer, repo_id: str) -> int:
    """LFS objects uploaded to storage: archives, tables and charts, the files the Hub keeps in
    LFS (`hubserver.store.upload_mode`)."""
    return sum(1 for r in hub.requests(repo_id, kind="storage") if r.method == "PUT")


def tables_and_charts(commit: CommitRecord) -> int:
    """The tables and charts `commit` wrote: each a new LFS object, uploaded with it."""
    return sum(1 for path in commit.added + commit.modified if path.endswith((".parquet", ".png")))


def test_card_upgrades_a_layout_2_repository_in_one_commit_copying_every_archive(
    hub: HubServer, repo_id: str
) -> None:
    files = layout_2_files()
    assert json.loads(files[RECORD])["format"] == 1  # the previous release vouched for its tables
    hub.create_repo(repo_id, files=files)
    commits = len(hub.commits(repo_id))
    seeded = hub.commits(repo_id)[0]  # the commit that published the bundles
    hub.reset_requests()
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["upgraded"] is True and result["bundle_count"] == 3
    (upgrade,) = hub.commits(repo_id)[: len(hub.commits(repo_id)) - commits]
    assert upgrade.oid == result["commit"] and "layout 3" in upgrade.summary
    # every archive copied on the Hub, none uploaded: what went up is the tables and charts
    assert lfs_uploads(hub, repo_id) == tables_and_charts(upgrade) > 0
    bundles = old_bundles(files)
    # byte for byte in their shards, nothing left at the old paths
    assert held_bundles(hub, repo_id) == moved(bundles)
    old_table = {ALL_TABLE}  # the table in one file, now in parts
    assert (
        set(upgrade.deleted) == {p for p in files if unsharded_bundle_of(p) is not None} | old_table
    )
    rows = table_rows(hub, repo_id)
    assert sorted(str(row["bundle_id"]) for row in rows) == sorted(map(str, bundles))
    # each dated by its publication, not by the move
    published = datetime.fromisoformat(seeded.created_at).replace(microsecond=0)
    assert {row["published_at"] for row in rows} == {published}
    commits = len(hub.commits(repo_id))
    code, result, stderr = card(repo_id)
    assert code == 0 and result["changed"] is False and result["upgraded"] is False, stderr
    assert len(hub.commits(repo_id)) == commits


def test_an_upload_into_a_layout_2_repository_upgrades_it_with_its_commit(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    files = layout_2_files()
    hub.create_repo(repo_id, files=files)
    commits = len(hub.commits(repo_id))
    bundles = make_bundles(tmp_path, [RunSpec(task="wires", rows=2)])
    hub.reset_requests()
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["published"]
    assert len(report["commits"]) == 1 and len(hub.commits(repo_id)) == commits + 1
    # the new bundle's archive, beside the tables and charts; the others copied
    assert lfs_uploads(hub, repo_id) == 1 + tables_and_charts(hub.commits(repo_id)[0])
    assert held_bundles(hub, repo_id) == moved(old_bundles(files)) | repo_files(bundles)
    assert len(table_rows(hub, repo_id)) == 4
    assert card(repo_id)[1]["changed"] is False


def test_a_layout_2_bundle_failing_verification_stays_where_it_is_and_is_named(
    hub: HubServer, repo_id: str
) -> None:
    files = layout_2_files()
    bad, _ = unsharded_paths(BundleId.parse("claude-opus_fe3fc2f4/maze@a1b2c3d4"))
    forged = bytearray(files[bad])
    forged[len(forged) // 2] ^= 0xFF
    files[bad] = bytes(forged)
    hub.create_repo(repo_id, files=files)
    code, result, stderr = card(repo_id)
    assert code == 1, stderr
    assert result["commit"] is not None and result["bundle_count"] == 2
    (problem,) = result["unreadable_rows"]
    assert problem.startswith(f"{bad.removesuffix('.tar.zst')}.json: failed verification")
    kept = {path: data for path, data in files.items() if path.startswith(bad.rsplit("/", 1)[0])}
    good = {b: both for b, both in old_bundles(files).items() if unsharded_paths(b)[0] != bad}
    assert held_bundles(hub, repo_id) == moved(good) | kept
    assert bad.removesuffix(".tar.zst") in stderr
    commits = len(hub.commits(repo_id))
    code, result, _ = card(repo_id)
    assert code == 1 and result["unreadable_rows"] == [problem]  # named until someone looks
    assert result["changed"] is False and len(hub.commits(repo_id)) == commits


def test_a_resumed_run_extends_its_bundle_kept_in_layout_2(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    last_night = partial_bundles(tmp_path / "night1", RunSpec(rows=3))
    hub.create_repo(repo_id, files=as_layout_2(repo_files(last_night)))
    tonight = make_bundles(tmp_path / "night2", [RunSpec(rows=5)])
    code, report, stderr = upload(tonight, "--repo", repo_id)
    assert code == 0, stderr
    (bundle,) = report["bundles"]
    assert (bundle["action"], bundle["outcome"]) == ("extends", "published"), bundle
    assert "3 -> 5 rows" in bundle["detail"]
    assert held_bundles(hub, repo_id) == repo_files(tonight)  # the old copy removed, not moved


def test_a_replacement_of_a_bundle_kept_in_layout_2_is_what_the_shard_holds(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    first = make_bundles(tmp_path / "a", [RunSpec(rows=3)])
    hub.create_repo(repo_id, files=as_layout_2(repo_files(first)))
    second = make_bundles(tmp_path / "b", [RunSpec(rows=3, metrics={"exact": {"acc": 0.99}})])
    code, report, stderr = upload(second, "--repo", repo_id)
    assert code == 1, stderr
    assert report["bundles"][0]["action"] == "conflict"  # compared with the layout-2 copy
    assert held_bundles(hub, repo_id) == as_layout_2(repo_files(first))
    code, report, stderr = upload(second, "--repo", repo_id, "--replace")
    assert code == 0, stderr
    assert report["bundles"][0]["action"] == "replace"
    assert held_bundles(hub, repo_id) == repo_files(second)
    (row,) = table_rows(hub, repo_id)
    assert row["archive_sha256"] == archive_sha256(second)


def test_a_second_copy_where_layout_2_kept_it_never_overwrites_the_shard(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """An older bundler's pull request, merged in the web page after the upgrade, puts a bundle
    the shard holds where layout 2 kept it: which copy is the bundle is for a person to say."""
    published = make_bundles(tmp_path / "a", [RunSpec(rows=3)])
    publish(published, repo_id)
    older = make_bundles(tmp_path / "b", [RunSpec(rows=3, metrics={"exact": {"acc": 0.99}})])
    commit_by_hand(repo_id, as_layout_2(repo_files(older)))
    code, result, stderr = card(repo_id)
    assert code == 1, stderr
    sidecar = unsharded_paths(id_of_local_archive(next(older.rglob("*.tar.zst"))))[1]
    assert result["unreadable_rows"] == [
        f"{sidecar}: a second copy of a bundle its shard holds; left out of the tables"
    ]
    assert held_bundles(hub, repo_id) == repo_files(published) | as_layout_2(repo_files(older))
    (row,) = table_rows(hub, repo_id)
    assert row["archive_sha256"] == archive_sha256(published)
    assert card(repo_id)[0] == 1  # named until someone removes one copy


def to_layout_2(hub: HubServer, repo_id: str) -> None:
    """Main as the previous release left it: its bundles where layout 2 kept them, and its
    record in that release's format."""
    held = {path: data for path, data in held_bundles(hub, repo_id).items() if data is not None}
    record = json.loads(hub.file_bytes(repo_id, RECORD) or b"{}")
    record["format"] = 1
    operations = [CommitOperationDelete(path) for path in held]
    operations += [CommitOperationAdd(path, data) for path, data in as_layout_2(held).items()]
    operations.append(CommitOperationAdd(RECORD, json.dumps(record).encode()))
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id, operations, commit_message="layout 2", repo_type="dataset"
    )


def test_a_pull_request_merges_only_once_main_is_upgraded(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Review compares a pull request with what main holds at the bundle's paths in its shard;
    a main still in layout 2 holds it elsewhere, so the merge waits for the upgrade."""
    world = make_world(hub, repo_id, tmp_path)
    to_layout_2(hub, repo_id)
    head = hub.commits(repo_id)[0].oid
    theirs = world.bundles(
        "theirs",
        [world.spec(model="gpt-5.2", rows=4, metrics={"exact_match": {"accuracy": 0.9}})],
        submitter="Grace",
    )
    propose(world, OTHER_SUBMITTER_TOKEN, theirs)
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    assert [bundle["classification"] for bundle in pr["bundles"]] == ["new"]
    assert pr["merge"] == "refused" and "where layout 2 kept it" in pr["merge_detail"]
    assert "run `bundler card` with a write token to upgrade it" in pr["merge_detail"]
    assert hub.commits(repo_id)[0].oid == head
    assert card(repo_id)[0] == 0
    code, report, stderr = review(world)
    (pr,) = report["pull_requests"]
    assert [bundle["classification"] for bundle in pr["bundles"]] == ["replacement"]


def test_download_names_layout_2_bundles_and_fetches_them_once_moved(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    files = layout_2_files()
    hub.create_repo(repo_id, files=files)
    code, report, stderr = download("--repo", repo_id, "-o", tmp_path / "before")
    assert code == 0 and report["bundles"] == [], stderr
    archives = sorted(unsharded_paths(bundle)[0] for bundle in old_bundles(files))
    assert report["warnings"] == [
        f"{path}: where layout 2 kept a bundle, not downloaded until the bundler's next commit "
        "to the branch moves it into its shard"
        for path in archives
    ]
    assert card(repo_id)[0] == 0
    code, report, stderr = download("--repo", repo_id, "-o", tmp_path / "after")
    assert code == 0 and report["warnings"] == [], stderr
    assert [b["outcome"] for b in report["bundles"]] == ["downloaded"] * 3
    assert as_layout_2(repo_files(tmp_path / "after")) == {
        path: data for path, data in files.items() if unsharded_bundle_of(path) is not None
    }


def test_tasks_define_upgrades_a_layout_2_repository_with_its_commit(
    hub: HubServer, repo_id: str
) -> None:
    files = layout_2_files()
    hub.create_repo(repo_id, files=files)
    commits = len(hub.commits(repo_id))
    hub.reset_requests()
    defined = run_cli(
        "tasks", "define", "maze", "--repo", repo_id, *VQA, env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert defined.returncode == 0, defined.stderr
    assert len(hub.commits(repo_id)) == commits + 1
    # the defined task's chart and the tables; no archive
    assert lfs_uploads(hub, repo_id) == tables_and_charts(hub.commits(repo_id)[0])
    assert hub.file_bytes(repo_id, task_chart("maze")) is not None
    assert held_bundles(hub, repo_id) == moved(old_bundles(files))
    assert len(table_rows(hub, repo_id)) == 3
