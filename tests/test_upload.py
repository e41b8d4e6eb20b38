"""`bundler upload` end to end: the installed CLI and the library against the local Hub server,
through the real huggingface_hub client over real HTTP."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import READ_TOKEN, WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import (
    BUNDLER,
    FORK_COUNTER,
    all_tasks_table,
    cli_env,
    probe_console_script,
    run_cli,
    run_cli_process,
    run_python,
)
from hubserver import HubServer
from huggingface_hub import CommitOperationDelete, HfApi

from bundler.core.errors import HubAccessError
from bundler.core.progress import NoProgress
from bundler.hub.client.session import HubSession
from bundler.hub.publish.upload import (
    UploadOptions,
    UploadReport,
    gather_local,
    verifying_ahead,
)
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import BUNDLES_DIR, repo_archive, repo_paths, repo_sidecar
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import (
    CACHE_NAMES,
    LOCK_NAME,
    VERIFY_CACHE_NAME,
    BundleId,
    id_of_local_archive,
    is_archive_path,
)
from bundler.local.verifycache import VerifyCache

SECOND_SHA = "ffeeddccbbaa99887766554433221100ffeeddcc"


def make_bundles(root: Path, specs: list[RunSpec], **options: object) -> Path:
    output = root / "output"
    bundles = root / "bundles"
    write_tree(output, specs)
    expected = {spec.task: spec.rows for spec in specs}
    report = collect(
        output,
        bundles,
        CollectOptions(expected_rows=expected, **options),  # type: ignore[arg-type]
    )
    assert not report.refused, report.refused
    return bundles


@pytest.fixture
def bundles(tmp_path: Path) -> Path:
    return make_bundles(
        tmp_path,
        [
            RunSpec(task="expert-vqa", model="gpt-5.2", rows=4),
            RunSpec(task="maze", model="Qwen/Qwen3.5-27B", rows=3, resolved_revision=SECOND_SHA),
            RunSpec(task="wires", model="claude-opus", rows=2, metrics={"acc": {"v": [1, 2]}}),
        ],
    )


def upload(*args: object, token: str | None = WRITE_TOKEN) -> tuple[int, dict, str]:
    result = run_cli("upload", *args, "--json", env={"HF_TOKEN": token or ""})
    payload = json.loads(result.stdout) if result.stdout.strip() else {}
    assert "Traceback" not in result.stderr
    return result.returncode, payload, result.stderr


def publish(
    bundles: Path, repo_id: str, *, token: str = WRITE_TOKEN, **options: object
) -> UploadReport:
    """A repository that already holds `bundles`, for a test about what comes next: published
    by the library's upload (what `bundler upload` runs), which must succeed."""
    report = upload_library(
        bundles,
        UploadOptions(repo_id=repo_id, token=token, **options),  # type: ignore[arg-type]
    )
    assert report.exit_code == 0, report
    return report


def commit_posts(hub: HubServer, repo_id: str) -> int:
    return sum(1 for r in hub.request_log if r.method == "POST" and f"{repo_id}/commit/" in r.path)


def lfs_puts(hub: HubServer) -> int:
    return sum(1 for r in hub.request_log if r.method == "PUT")


def table_rows(hub: HubServer, repo_id: str, path: str | None = None) -> list[dict[str, object]]:
    """The rows of one of the repository's tables (the all-tasks table's parts when no path
    is given), read as any Parquet reader reads them."""
    if path is None:
        table = all_tasks_table(hub, repo_id)
        assert table is not None, "the all-tasks table is missing"
    else:
        data = hub.file_bytes(repo_id, path)
        assert data is not None, f"{path} is missing"
        table = pq.read_table(pa.BufferReader(data))
    rows: list[dict[str, object]] = table.to_pylist()
    return rows


def local_files(bundles: Path) -> dict[str, bytes]:
    return {
        path.relative_to(bundles).as_posix(): path.read_bytes()
        for path in sorted(bundles.rglob("*"))
        if path.is_file() and path.name != LOCK_NAME and path.name not in CACHE_NAMES
    }


def uploads_at_once(
    repo_id: str, uploads: list[tuple[Path, str]], *, timeout: float
) -> list[dict[str, Any]]:
    """`bundler upload --json` of each bundles folder with its token, all started at once as
    separate processes (as two nightly jobs overlap); each must succeed. Their reports."""
    processes = [
        subprocess.Popen(
            [str(BUNDLER), "upload", str(bundles), "--repo", repo_id, "--json"],
            env=cli_env({"HF_TOKEN": token}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for bundles, token in uploads
    ]
    results = [process.communicate(timeout=timeout) for process in processes]
    for process, (_, stderr) in zip(processes, results, strict=True):
        assert process.returncode == 0, stderr
    return [json.loads(stdout) for stdout, _ in results]


def repo_files(bundles: Path) -> dict[str, bytes]:
    """A local bundles folder's files at the repository paths its bundles are published at
    (bundler.hub.repo.paths): what the Hub holds for them, byte for byte. Every file of the
    folder must be a bundle's archive or sidecar."""
    local = local_files(bundles)
    files: dict[str, bytes] = {}
    for relative in filter(is_archive_path, local):
        bundle = id_of_local_archive(bundles / relative)
        places = (bundle.local_archive(bundles), bundle.local_sidecar(bundles))
        for path, place in zip(repo_paths(bundle), places, strict=True):
            files[path] = local[place.relative_to(bundles).as_posix()]
    assert len(files) == len(local), f"not only bundles in {bundles}: {sorted(local)}"
    return files


def hub_bundle_files(hub: HubServer, repo_id: str, revision: str = "main") -> dict[str, bytes]:
    """Every file under the repository's `bundles/` at `revision`, by its path."""
    return {
        path: hub.file_bytes(repo_id, path, revision=revision) or b""
        for path in hub.list_files(repo_id, revision=revision)
        if path.startswith(f"{BUNDLES_DIR}/")
    }


def test_upload_publishes_every_bundle_in_one_commit(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    assert sorted(b["outcome"] for b in report["bundles"]) == ["published"] * 3
    assert len(report["commits"]) == 1
    files = hub.list_files(repo_id)
    assert hub_bundle_files(hub, repo_id) == repo_files(bundles)
    tables = sorted(path for path in files if path.startswith("leaderboard/"))
    assert tables == [
        "leaderboard/bundles/part-00000.parquet",
        "leaderboard/derived.json",
        "leaderboard/tasks/expert-vqa.parquet",
        "leaderboard/tasks/maze.parquet",
        "leaderboard/tasks/wires.parquet",
    ]
    assert not [path for path in files if path.startswith(("rows/", "tasks/"))]
    card = hub.file_bytes(repo_id, "README.md")
    assert card is not None and b"configs:" in card and b"**3** submission bundle(s)" in card
    summary = hub.commits(repo_id)[0].summary
    assert "gpt-5-2_" in summary and "maze@ffeeddcc" in summary


def test_reupload_makes_no_commit_and_uploads_no_bytes(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    assert upload(bundles, "--repo", repo_id)[0] == 0
    commits_before = len(hub.commits(repo_id))
    posts_before, puts_before = commit_posts(hub, repo_id), lfs_puts(hub)
    preuploads_before = sum(1 for r in hub.request_log if "/preupload/" in r.path)
    code, report, _ = upload(bundles, "--repo", repo_id)
    assert code == 0
    assert [b["outcome"] for b in report["bundles"]] == ["already-there"] * 3
    assert report["commits"] == []
    assert len(hub.commits(repo_id)) == commits_before
    assert commit_posts(hub, repo_id) == posts_before
    assert lfs_puts(hub) == puts_before
    assert sum(1 for r in hub.request_log if "/preupload/" in r.path) == preuploads_before


def test_changed_bundle_is_a_conflict_until_replace(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    first = make_bundles(tmp_path / "a", [RunSpec(rows=3)])
    assert upload(first, "--repo", repo_id)[0] == 0
    # Same run identity, different content (a re-scored run): same bundle id, new bytes.
    second = make_bundles(tmp_path / "b", [RunSpec(rows=3, metrics={"exact": {"acc": 0.99}})])
    code, report, stderr = upload(second, "--repo", repo_id)
    assert code == 1
    (bundle,) = report["bundles"]
    assert bundle["action"] == "conflict" and bundle["outcome"] == "refused"
    assert "--replace" in stderr
    archive = next(second.rglob("*.tar.zst"))
    remote_path = repo_archive(id_of_local_archive(archive))
    assert hub.file_bytes(repo_id, remote_path) != archive.read_bytes()

    code, report, _ = upload(second, "--repo", repo_id, "--replace")
    assert code == 0
    assert report["bundles"][0]["action"] == "replace"
    assert hub.file_bytes(repo_id, remote_path) == archive.read_bytes()


def test_dry_run_touches_nothing(hub: HubServer, repo_id: str, bundles: Path) -> None:
    log_before = len(hub.request_log)
    code, report, stderr = upload(bundles, "--repo", repo_id, "--dry-run")
    assert code == 0, stderr
    assert report["dry_run"] is True
    assert [b["action"] for b in report["bundles"]] == ["new"] * 3
    assert [b["outcome"] for b in report["bundles"]] == ["planned"] * 3
    writes = [r for r in hub.request_log[log_before:] if "/commit/" in r.path or r.method == "PUT"]
    assert writes == [] and hub.list_files(repo_id) == [".gitattributes"]


def test_a_repository_that_does_not_exist_is_never_created(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    """A typo in --repo: one line naming `bundler init`, exit 2, and nothing created, in a dry
    run as in a real one (only `bundler init` creates a repository)."""
    typo = f"{repo_id}-typo"
    for dry in (["--dry-run"], []):
        code, report, stderr = upload(bundles, "--repo", typo, *dry)
        assert code == 2, stderr
        assert f"dataset {typo} was not found" in stderr and "bundler init --repo" in stderr
        assert report["error_kind"] == "repository-not-found"
    with pytest.raises(LookupError):
        hub.list_files(typo)


def test_partial_bundle_is_held_back_unless_allowed(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A run still in progress is held back with a warning, not published, and does not make
    the nightly job fail (exit 0); the complete bundles beside it still go up."""
    output = tmp_path / "output"
    write_tree(output, [RunSpec(rows=3), RunSpec(task="maze", rows=2)])
    partial = tmp_path / "bundles"
    collect(
        output,
        partial,
        CollectOptions(expected_rows={"expert-vqa": 10, "maze": 2}, allow_partial=True),
    )
    code, report, stderr = upload(partial, "--repo", repo_id)
    assert code == 0, stderr
    outcomes = {b["bundle_id"].split("/")[1]: b for b in report["bundles"]}
    held = outcomes["expert-vqa@a1b2c3d4"]
    assert held["action"] == "held-back" and held["outcome"] == "held-back"
    assert "3 of 10 rows" in held["detail"] and "--allow-partial" in held["detail"]
    assert outcomes["maze@a1b2c3d4"]["outcome"] == "published"
    assert "warning" in stderr and "held back" in stderr
    assert not any("expert-vqa" in path for path in hub.list_files(repo_id))
    code, report, _ = upload(partial, "--repo", repo_id, "--allow-partial")
    assert code == 0
    assert sorted(b["outcome"] for b in report["bundles"]) == ["already-there", "published"]


def test_bundle_failing_verification_is_not_uploaded(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    victim = sorted(bundles.rglob("*.tar.zst"))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    code, report, _stderr = upload(bundles, "--repo", repo_id)
    assert code == 1
    outcomes = {b["bundle_id"]: b["outcome"] for b in report["bundles"]}
    assert sorted(outcomes.values()) == ["published", "published", "refused"]
    refused = next(b for b in report["bundles"] if b["outcome"] == "refused")
    assert "failed verification" in refused["detail"]
    remote = hub.list_files(repo_id)
    assert not any(victim.name in path for path in remote)


def test_many_bundles_take_few_commits(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    specs = [RunSpec(task=f"task{i:02d}", model="m", rows=1) for i in range(40)]
    bundles = make_bundles(tmp_path, specs)
    code, report, _ = upload(bundles, "--repo", repo_id)
    assert code == 0
    assert len(report["commits"]) == 2  # 40 bundles, 33 a commit: 2 commits, not 40
    for commit in hub.commits(repo_id)[:2]:
        assert len(commit.files_changed) <= 100


def test_bad_token_is_a_clear_error_and_never_echoed(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    bad = "hf_NotAValidTokenAtAll0123456789xyz"
    result = run_cli("upload", bundles, "--repo", repo_id, "--token", bad, env={"HF_TOKEN": ""})
    assert result.returncode == 2
    assert "credentials" in result.stderr and "--token" in result.stderr
    assert bad not in result.stderr + result.stdout
    result = run_cli("upload", bundles, "--repo", repo_id, "--debug", env={"HF_TOKEN": bad})
    assert result.returncode == 2
    assert bad not in result.stderr + result.stdout


def test_a_token_with_a_line_break_works_as_it_does_for_hf(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    """A secret pasted from a CRLF file: huggingface_hub drops the line break from HF_TOKEN, so
    `hf` works with it; the bundler did not, and retried a request that could never be sent
    until it exited 75, which a nightly job reads as 'try tomorrow'."""
    code, report, stderr = upload(bundles, "--repo", repo_id, token=f" {WRITE_TOKEN}\r\n")
    assert code == 0, stderr
    assert sorted(b["outcome"] for b in report["bundles"]) == ["published"] * 3


def test_a_token_that_cannot_be_sent_is_a_credentials_error_never_echoed(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    broken = "hf_Broken\u20acToken0123456789abcdef"
    for extra in ([], ["--debug"]):
        result = run_cli("upload", bundles, "--repo", repo_id, *extra, env={"HF_TOKEN": broken})
        assert result.returncode == 2, result.stderr
        assert "the token (--token or HF_TOKEN) holds characters" in result.stderr
        assert "Broken" not in result.stderr + result.stdout


def test_a_header_the_client_cannot_send_is_not_retried_as_a_hub_outage(hub: HubServer) -> None:
    """The library path, where no command line cleaned the token: the client refuses to send
    the header (LocalProtocolError), which no retry can mend, and whose text holds the token."""
    session = HubSession("owner/name", token=f"{WRITE_TOKEN}\r")
    before = len(hub.request_log)
    with pytest.raises(HubAccessError) as raised:
        session.whoami()
    assert raised.value.exit_code == 2
    assert "header is not valid HTTP" in str(raised.value)
    assert WRITE_TOKEN not in str(raised.value) + str(raised.value.hint)
    assert len(hub.request_log) == before  # refused before sending, and not retried


def test_read_only_token_is_refused_before_anything_is_sent(
    hub: HubServer, repo_id: str, bundles: Path
) -> None:
    hub.create_repo(repo_id)
    for extra in ([], ["--create-pr"], ["--dry-run"]):
        before = len(hub.request_log)
        code, payload, stderr = upload(bundles, "--repo", repo_id, *extra, token=READ_TOKEN)
        assert code == 2, extra
        assert "read-only" in stderr and "write token of your own account" in stderr
        assert READ_TOKEN not in stderr + json.dumps(payload)
        assert "error" in payload
        sent = hub.request_log[before:]
        assert not [r for r in sent if r.method == "POST" or "/paths-info/" in r.path]


def test_model_repository_is_not_a_dataset(hub: HubServer, repo_id: str, bundles: Path) -> None:
    model = f"{repo_id}-model"
    hub.create_repo(model, repo_type="model")
    code, _, stderr = upload(bundles, "--repo", model)
    assert code == 2
    assert "is a model repository, not a dataset" in stderr


def test_missing_revision_is_a_clear_error(hub: HubServer, repo_id: str, bundles: Path) -> None:
    hub.create_repo(repo_id)
    code, _, stderr = upload(bundles, "--repo", repo_id, "--revision", "no-such-branch")
    assert code == 2
    assert "revision does not exist" in stderr and "--revision" in stderr


@pytest.mark.parametrize("repo", ["not a repo", "a/b/c", "../etc", "notarepo", "café/x"])
def test_invalid_repo_id_is_a_usage_error(repo: str, bundles: Path, tmp_path: Path) -> None:
    code, payload, stderr = upload(bundles, "--repo", repo)
    assert code == 2
    assert "expected OWNER/NAME" in stderr and payload["exit_code"] == 2
    result = run_cli("download", "--repo", repo, "-o", tmp_path / "dl")
    assert result.returncode == 2 and "expected OWNER/NAME" in result.stderr
    assert not (tmp_path / "dl").exists()


def test_missing_bundles_dir_is_unusable_input(repo_id: str, tmp_path: Path) -> None:
    code, payload, stderr = upload(tmp_path / "nope", "--repo", repo_id)
    assert code == 2
    assert "nope" in stderr and payload["exit_code"] == 2


def test_upload_copies_nothing_it_was_not_given(
    tmp_path: Path, repo_id: str, bundles: Path
) -> None:
    before = local_files(bundles)
    assert upload(bundles, "--repo", repo_id)[0] == 0
    assert local_files(bundles) == before


def test_two_different_bundles_under_one_id_are_refused(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    first = make_bundles(tmp_path / "a", [RunSpec(rows=2)])
    second = make_bundles(tmp_path / "b", [RunSpec(rows=2, metrics={"other": {"x": 1}})])
    folder = tmp_path / "both"
    shutil.copytree(first, folder / "night1")
    shutil.copytree(second, folder / "night2")
    code, report, _ = upload(folder, "--repo", repo_id, "--dry-run")
    assert code == 1
    (bundle,) = report["bundles"]
    assert bundle["outcome"] == "refused" and "differ" in bundle["detail"]
    shutil.copytree(first, folder / "night2", dirs_exist_ok=True)  # now an identical copy
    code, report, _ = upload(folder, "--repo", repo_id)
    assert code == 0 and [b["outcome"] for b in report["bundles"]] == ["published"]


def test_metrics_beyond_float64_publish_a_null_number(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    huge = 10**400
    bundles = make_bundles(tmp_path, [RunSpec(rows=2, metrics={"s": {"huge": huge, "n": 2}})])
    code, _, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    (row,) = table_rows(hub, repo_id)
    assert row["metrics"][0] == {"name": "s.huge", "number": None, "json_value": str(huge)}
    assert json.loads(row["metrics_json"])["s"]["huge"] == huge


def test_a_bundle_whose_sidecar_went_missing_is_repaired(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The archive is on the Hub and its sidecar is gone (a hand edit, which leaves the tables
    stale): the upload repairs the bundle, publishing its sidecar again and its row."""
    folder = make_bundles(tmp_path, [RunSpec(task="alpha", rows=2)])
    code, report, _ = upload(folder, "--repo", repo_id)
    assert code == 0
    key = BundleId.parse(report["bundles"][0]["bundle_id"])
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id,
        [CommitOperationDelete(repo_sidecar(key))],
        commit_message="hand edit",
        repo_type="dataset",
    )
    code, report, stderr = upload(folder, "--repo", repo_id)
    assert code == 0, stderr
    assert [(b["action"], b["outcome"]) for b in report["bundles"]] == [("repair", "published")]
    assert hub.file_bytes(repo_id, repo_sidecar(key)) == key.local_sidecar(folder).read_bytes()
    assert [row["bundle_id"] for row in table_rows(hub, repo_id)] == [str(key)]


VERIFY_AHEAD = (
    FORK_COUNTER
    + """
import json, sys
from pathlib import Path
from bundler.core.forked import allow_forks
from bundler.core.progress import NoProgress
from bundler.hub.publish.upload import verifying_ahead
try:
    if sys.argv[2] == "child":
        allow_forks()  # as the console script does
    with verifying_ahead(Path(sys.argv[1]), allow_partial=False, progress=NoProgress()) as verified:
        local, set_aside = verified()
    print(json.dumps({"forks": len(forks), "local": sorted(b.bundle_id for b in local),
                      "set_aside": [p.model_dump(mode="json") for p in set_aside]}))
except Exception as error:
    print(json.dumps({"forks": len(forks), "error": str(error)}))
"""
)


def verified_ahead(folder: Path, where: str = "child") -> dict[str, object]:
    """VERIFY_AHEAD's report, run in a process of one thread, as the console script is."""
    result = run_python(VERIFY_AHEAD, folder, where)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_the_console_script_verifies_in_a_forked_child_with_the_same_result(
    bundles: Path, tmp_path: Path
) -> None:
    """One thread, as the console script is: the bundles are verified in a child while the
    parent loads the Hub client, and the result is what verifying in line gives (a corrupt
    bundle refused alike). A child that fails (no bundles folder) leaves the same work to the
    parent, which then says why."""
    victim = sorted(bundles.rglob("*.tar.zst"))[0]
    victim.write_bytes(victim.read_bytes()[:-10])
    local, set_aside = gather_local(bundles, allow_partial=False, progress=NoProgress())
    assert verified_ahead(bundles) == {
        "forks": 1,
        "local": sorted(bundle.bundle_id for bundle in local),
        "set_aside": [plan.model_dump(mode="json") for plan in set_aside],
    }
    assert [plan.action for plan in set_aside] == ["refused"]
    assert verified_ahead(bundles, "in line")["forks"] == 0  # what a library caller gets
    missing = tmp_path / "no-such-folder"
    assert verified_ahead(missing) == {
        "forks": 1,
        "error": f"{missing}: no such bundle archive or directory",
    }


def test_a_verify_cache_loaded_before_is_the_one_the_folder_is_gathered_with(
    bundles: Path,
) -> None:
    """sync loads the folder's verify cache while its runs are found, the folder locked all
    along (bundler.sync): upload gathers with that one, not the file read again. Here the
    file is gone meanwhile: the cache given still vouches for every bundle, and nothing is
    verified again (so nothing is recorded, and the file is not written back)."""
    gather_local(bundles, allow_partial=False, progress=NoProgress())  # fills the cache
    loaded = VerifyCache(bundles)
    (bundles / VERIFY_CACHE_NAME).unlink()
    local, set_aside = gather_local(
        bundles, allow_partial=False, progress=NoProgress(), cache=loaded
    )
    assert len(local) == 3 and set_aside == []
    assert not (bundles / VERIFY_CACHE_NAME).exists()  # nothing verified again, nothing recorded
    with verifying_ahead(bundles, allow_partial=False, progress=NoProgress()) as gathered:
        gathered()  # the file read: gone, so every bundle verified again, recorded, written
    assert (bundles / VERIFY_CACHE_NAME).exists()
    given = VerifyCache(bundles)
    (bundles / VERIFY_CACHE_NAME).unlink()
    with verifying_ahead(
        bundles, allow_partial=False, progress=NoProgress(), cache=given
    ) as gathered:
        assert sorted(b.bundle_id for b in gathered()[0]) == sorted(b.bundle_id for b in local)
    assert not (bundles / VERIFY_CACHE_NAME).exists()


def test_an_endpoint_that_is_no_url_is_unusable_not_a_hub_outage(bundles: Path) -> None:
    """HF_ENDPOINT without its scheme fails the same way every time: exit 2 at once, naming
    the variable, not retries and exit 75 ("try again later"), which a nightly job ignores.
    (The client reads HF_ENDPOINT when it is imported: a process of its own.)"""
    result = run_cli_process(
        "upload",
        bundles,
        "--repo",
        "owner/name",
        env={"HF_TOKEN": WRITE_TOKEN, "HF_ENDPOINT": "hub.example.org"},
    )
    assert result.returncode == 2, result.stderr
    assert "not an http(s) URL" in result.stderr and "HF_ENDPOINT" in result.stderr


def test_the_verifying_childs_watch_ends_it_once_its_parent_is_another() -> None:
    """kill -9 of the parent tells the child nothing: it must notice on its own, at its next
    step (its parent is then another process), rather than go on reading the bundles folder
    the next run may be using."""
    probe = (
        "import os, sys\n"
        "from bundler.core.forked import orphan_watch\n"
        "from bundler.hub.publish.upload import ParentWatch\n"
        "ParentWatch(orphan_watch(os.getppid())).advance()\n"
        "print('same parent: going on', flush=True)\n"  # os._exit flushes nothing
        "ParentWatch(orphan_watch(os.getppid() + 1)).begin('x', None)\n"
        "print('never printed')\n"
    )
    result = run_python(probe)
    assert (result.returncode, result.stdout) == (1, "same parent: going on\n")


def test_the_upload_command_verifies_in_a_forked_child(
    hub: HubServer, repo_id: str, bundles: Path, tmp_path: Path
) -> None:
    """The console script asks for the child: it knows it has no other thread. (A library
    caller, whose process may have threads of its own, verifies in line by default.)"""
    code, state = probe_console_script(
        tmp_path, "upload", bundles, "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert code == 0
    assert state["forks"] == 1
    assert state["loaded_at_forks"] == [[]]  # the Hub client loads while the child verifies


def test_the_upload_command_leaves_pandas_out_though_it_is_installed(
    hub: HubServer, repo_id: str, bundles: Path, tmp_path: Path
) -> None:
    """pyarrow would load pandas, where it is installed, at the first table it writes: about
    half a second the command has no use for (bundler.cli.app.PandasLeftOut). The test
    environment has pandas (`datasets` requires it), so this upload, which writes the tables,
    is where pyarrow would load it."""
    assert importlib.util.find_spec("pandas") is not None, "the test needs pandas installed"
    code, state = probe_console_script(
        tmp_path, "upload", bundles, "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert code == 0
    assert "bundler.hub.leaderboard.tables" in state["loaded"]
    assert [name for name in state["loaded"] if name.startswith("pandas")] == []
    files = HfApi(token=WRITE_TOKEN).list_repo_files(repo_id, repo_type="dataset")
    assert any(path.endswith(".parquet") for path in files)


def test_a_process_with_native_threads_forks_no_child(bundles: Path) -> None:
    """pyarrow starts native threads as it loads, which threading does not count: a process
    that loaded it must verify in line, never fork a child that could inherit a lock one of
    those threads held."""
    probe = (
        FORK_COUNTER + "from pathlib import Path\n"
        "from bundler.core.forked import allow_forks, can_fork\n"
        "from bundler.core.progress import NoProgress\n"
        "from bundler.hub.publish.upload import verifying_ahead\n"
        "allow_forks()\n"
        "before = can_fork()\n"
        "import pyarrow\n"
        "kw = dict(allow_partial=False, progress=NoProgress())\n"
        "with verifying_ahead(Path(sys.argv[1]), **kw) as gathered:\n"
        "    local, _ = gathered()\n"
        "print(before, can_fork(), len(forks), len(local))\n"
    )
    result = run_python(probe, bundles)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "0", str(len(list(bundles.rglob("*.zst"))))]


def test_threads_that_were_joined_never_keep_a_process_from_forking(tmp_path: Path) -> None:
    """Collect fsyncs a few files at once on threads, and the upload's verifying child comes
    next: a joined thread still listed by the system for a moment must not be taken for a
    native one that runs on (on a busy machine, 86 of 300 such pools lingered). Every one of
    200 pools must leave a process that may fork, whatever the load."""
    probe = (
        "import os, sys\n"
        "from bundler.core.forked import allow_forks, can_fork\n"
        "from bundler.local.durablebatch import sync_all\n"
        "allow_forks()\n"
        "paths = [os.path.join(sys.argv[1], str(n)) for n in range(3)]\n"
        "descriptors = [os.open(p, os.O_CREAT | os.O_WRONLY) for p in paths]\n"
        "refused = 0\n"
        "for _ in range(200):\n"
        "    assert sync_all(descriptors) == [None] * 3\n"
        "    refused += not can_fork()\n"
        "print(refused)\n"
    )
    result = run_python(probe, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0"]


def define_expert_vqa(repo_id: str) -> None:
    """The maintainers define expert-vqa (GPTNT/expert-VQA, split test) with the command."""
    defined = run_cli(
        "tasks", "define", "expert-vqa", "--repo", repo_id, "--dataset", "GPTNT/expert-VQA",
        "--split", "test", "--metric", "exact_match.accuracy", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr


def test_a_bundle_contradicting_its_task_definition_is_refused(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    first = make_bundles(tmp_path / "a", [RunSpec(rows=3)])
    assert upload(first, "--repo", repo_id)[0] == 0
    define_expert_vqa(repo_id)
    assert b"GPTNT/expert-VQA" in (hub.file_bytes(repo_id, "README.md") or b"")  # card re-ranked
    specs = [
        RunSpec(model="dev-split", rows=3, dataset_split="dev"),
        RunSpec(model="fine", rows=3),
    ]
    code, report, stderr = upload(make_bundles(tmp_path / "b", specs), "--repo", repo_id)
    assert code == 1, stderr
    outcomes = {b["bundle_id"].split("_")[0]: b for b in report["bundles"]}
    refused = outcomes["dev-split"]
    assert (refused["action"], refused["outcome"]) == ("refused", "refused")
    assert (
        "contradicts the definition of task expert-vqa on main: split dev, not test"
        in (refused["detail"])
    )
    assert outcomes["fine"]["outcome"] == "published"
    assert not any(p.startswith("bundles/dev-split_") for p in hub.list_files(repo_id))


def test_a_twin_of_a_defined_task_is_refused_naming_the_defined_one(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """`Expert-VQA` beside the defined `expert-vqa` is one task to a person, and two tables
    no case-insensitive file system can hold: the upload refuses it, and so does defining it."""
    first = make_bundles(tmp_path / "a", [RunSpec(rows=3)])
    assert upload(first, "--repo", repo_id)[0] == 0
    define = ("tasks", "define", "--repo", repo_id, "--dataset", "GPTNT/expert-VQA")
    define += ("--metric", "exact_match.accuracy", "--split")
    defined = run_cli(*define, "test", "expert-vqa", env={"HF_TOKEN": WRITE_TOKEN})
    assert defined.returncode == 0, defined.stderr
    specs = [RunSpec(model="twin", task="Expert-VQA", rows=3), RunSpec(model="fine", rows=3)]
    code, report, stderr = upload(make_bundles(tmp_path / "b", specs), "--repo", repo_id)
    assert code == 1, stderr
    outcomes = {b["bundle_id"].split("_")[0]: b for b in report["bundles"]}
    assert outcomes["twin"]["outcome"] == "refused"
    assert (
        "task Expert-VQA is a twin of the task expert-vqa defined on main"
        in (outcomes["twin"]["detail"])
    )
    assert outcomes["fine"]["outcome"] == "published"
    twin = run_cli(*define, "test", "EXPERT-vqa", env={"HF_TOKEN": WRITE_TOKEN})
    assert twin.returncode == 2 and "twin of the defined task 'expert-vqa'" in twin.stderr


def test_a_command_that_loaded_pyarrow_ends_with_its_exit_code_and_all_its_output(
    hub: HubServer, repo_id: str, bundles: Path, tmp_path: Path
) -> None:
    """Once pyarrow is loaded the console script ends without the native libraries' teardown
    (bundler.cli.app): its exit code, its whole JSON report and its atexit handlers are what
    they would be otherwise."""
    broken = sorted(bundles.rglob("*.tar.zst"))[0]
    broken.write_bytes(broken.read_bytes()[:-7])
    result = run_cli_process(
        "upload", bundles, "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)  # all of it: flushed before the process ended
    assert report["exit_code"] == 1
    assert sorted(b["outcome"] for b in report["bundles"]) == ["published", "published", "refused"]
    assert "terminate called" not in result.stderr
    code, state = probe_console_script(
        tmp_path, "upload", bundles, "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert code == 1
    assert "bundler.hub.leaderboard.tables" in state["loaded"]  # pyarrow was loaded, and the
    # probe's own atexit handler still wrote this state
