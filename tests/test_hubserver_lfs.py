"""The test Hub keeps in LFS what the Hub keeps there (hubserver.store.upload_mode): the names a
new dataset repository's `.gitattributes` tracks, and binary content under any name, judged
from the sample the client sends; a binary file committed outside LFS is refused, as the Hub
refuses it. Never kinder than the Hub: an upload that the test Hub lets through as a regular
file may not need an LFS batch on the Hub."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
from conftest import WRITE_TOKEN
from hubserver import HubServer
from hubserver.store import GITATTRIBUTES
from huggingface_hub import CommitOperationAdd, HfApi

PARQUET = b"PAR1\x15\x04\x15\x00" + b"x" * 64 + b"PAR1"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"y" * 64


def test_a_new_repository_tracks_what_the_hubs_default_gitattributes_track(
    hub: HubServer, repo_id: str
) -> None:
    attributes = (hub.file_bytes(repo_id, ".gitattributes") or b"").decode()
    assert attributes.encode() == GITATTRIBUTES and attributes.count("\n") == 59
    for pattern in ("*.parquet", "*.tar.*", "*.zst", "*.png"):
        assert f"\n{pattern} filter=lfs diff=lfs merge=lfs -text\n" in attributes


def test_tables_charts_bundles_and_binary_content_go_through_lfs_and_the_rest_does_not(
    hub: HubServer, repo_id: str
) -> None:
    files = {
        "leaderboard/bundles/part-00000.parquet": PARQUET,
        "leaderboard/charts/task.png": PNG,
        "bundles/a/b.tar.zst": b"\x28\xb5\x2f\xfd" + b"z" * 64,  # no NUL: its name decides
        "notes/blob.dat": b"text, then \x00 binary",  # no pattern: its content decides
        "leaderboard/derived.json": json.dumps({"format": 1}).encode(),
        "leaderboard/tasks.yaml": b"tasks: []\n",
        "README.md": b"---\nlicense: mit\n---\n# Board\n",
    }
    api = HfApi(token=WRITE_TOKEN)
    api.create_commit(
        repo_id,
        [CommitOperationAdd(path, data) for path, data in files.items()],
        commit_message="Files of every kind",
        repo_type="dataset",
    )
    held = {
        info.path: info for info in api.get_paths_info(repo_id, list(files), repo_type="dataset")
    }
    in_lfs = {path for path, info in held.items() if info.lfs is not None}  # type: ignore[union-attr]
    assert in_lfs == {
        "leaderboard/bundles/part-00000.parquet",
        "leaderboard/charts/task.png",
        "bundles/a/b.tar.zst",
        "notes/blob.dat",
    }
    assert {hub.file_bytes(repo_id, path) for path in files} == set(files.values())


def test_a_binary_file_committed_outside_lfs_is_refused(hub: HubServer, repo_id: str) -> None:
    lines = [
        {"key": "header", "value": {"summary": "Sneaky", "description": ""}},
        {
            "key": "file",
            "value": {"path": "table.bin", "content": base64.b64encode(PARQUET).decode()},
        },
    ]
    request = urllib.request.Request(
        f"{hub.url}/api/datasets/{repo_id}/commit/main",
        data=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        headers={"Authorization": f"Bearer {WRITE_TOKEN}", "Content-Type": "application/x-ndjson"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request)
    assert err.value.code == 400
    assert "contains binary files" in err.value.read().decode()
    assert len(hub.commits(repo_id)) == 1
