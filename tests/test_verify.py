"""verify: every check proved by a bundle tampered with by hand (real tarfile, real zstd)."""

from __future__ import annotations

import copy
import json
import tarfile
import time
from pathlib import Path

import pytest
import zstandard
from factory import RunSpec
from helpers import (
    Member,
    build,
    forge,
    manifest_member,
    nested_folders,
    one_line_error,
    only_bundle,
    read_members,
    refresh_manifest,
    regular,
    rewrite_sidecar,
    run_cli,
    run_cli_measured,
    sidecar_path,
    tar_bytes,
)

from bundler.collect import CollectOptions
from bundler.errors import UsageError
from bundler.verify import read_bundle, verify

ROWS = 6


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    report, _ = build(
        tmp_path, [RunSpec(rows=ROWS)], CollectOptions(expected_rows={"expert-vqa": ROWS})
    )
    return Path(only_bundle(report).archive)


def statuses(path: Path) -> dict[str, str]:
    return {check.name: check.status for check in read_bundle(path).checks}


def failure(path: Path, name: str) -> str:
    """The detail of the failed check `name`; asserts the bundle failed it."""
    reading = read_bundle(path)
    assert not reading.verification().ok
    details = [check.detail for check in reading.checks if check.name == name]
    failed = [check for check in reading.checks if check.name == name and check.status == "failed"]
    assert failed, (name, reading.checks)
    return details[-1] if len(failed) == len(details) else failed[0].detail


def test_a_good_bundle_passes_every_check(archive: Path) -> None:
    assert statuses(archive) == {
        "sidecar": "passed",
        "manifest": "passed",
        "members": "passed",
        "contents": "passed",
        "identity": "passed",
        "predictions": "passed",
        "zstd": "passed",
        "archive-digest": "passed",
        "location": "passed",
    }
    report = verify([archive])
    assert report.exit_code == 0 and report.bundles[0].bundle_id is not None


def test_directories_are_searched_and_temporary_files_ignored(archive: Path) -> None:
    (archive.parent / f".{archive.name}.abc.partial").write_bytes(b"half")
    report = verify([archive.parent.parent])
    assert [bundle.archive for bundle in report.bundles] == [str(archive)]


def test_missing_path_and_empty_directory_are_unusable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such bundle archive or directory"):
        verify([tmp_path / "nope.tar.zst"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"not a \.tar\.zst bundle, and no bundle is below it"):
        verify([tmp_path / "empty"])


def test_incomplete_coverage_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [RunSpec(rows=3)])
    reading = read_bundle(Path(only_bundle(report).archive))
    assert reading.verification().ok
    assert ("coverage", "warned") in [(check.name, check.status) for check in reading.checks]


# The archive's bytes ---------------------------------------------------------------------------


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def test_flipped_byte_fails_the_sidecar_digest_and_the_stream(archive: Path) -> None:
    flip(archive, archive.stat().st_size // 2)
    result = statuses(archive)
    assert result["archive-digest"] == "failed"
    assert "failed" in (result.get("zstd"), result.get("members"))


def test_flipped_checksum_fails_zstd_even_with_a_matching_sidecar(archive: Path) -> None:
    flip(archive, archive.stat().st_size - 2)  # inside the frame's 4-byte content checksum
    rewrite_sidecar(archive)
    result = statuses(archive)
    assert result["archive-digest"] == "passed"
    assert result["zstd"] == "failed"
    assert "corrupt compressed data" in failure(archive, "zstd")


def test_frame_without_checksum_is_refused(archive: Path) -> None:
    forge(archive, lambda members: members, checksum=False)
    assert failure(archive, "zstd") == "the zstd frame carries no checksum"


def test_not_zstd_at_all(archive: Path) -> None:
    archive.write_bytes(tar_bytes(read_members(archive)))
    rewrite_sidecar(archive)
    assert failure(archive, "zstd").startswith("not a zstd stream")


def test_truncated_archive(archive: Path) -> None:
    archive.write_bytes(archive.read_bytes()[:-200])
    rewrite_sidecar(archive)
    assert not read_bundle(archive).verification().ok


# Members against the manifest ------------------------------------------------------------------


def test_tampered_member_with_recomputed_archive_fails_its_sha256(archive: Path) -> None:
    def tamper(members: list[Member]) -> list[Member]:
        members[5].data = members[5].data.replace(b"answer", b"ANSWER")
        return members

    forge(archive, tamper)
    result = statuses(archive)
    assert result["archive-digest"] == "passed"
    assert "prediction_2.json: sha256 differs from the manifest" in failure(archive, "contents")


def test_extra_member(archive: Path) -> None:
    forge(archive, lambda members: [*members, regular("predictions/prediction_99.json", b"{}")])
    assert "unexpected member 'predictions/prediction_99.json'" in failure(archive, "members")


def test_missing_member(archive: Path) -> None:
    forge(archive, lambda members: members[:-1])
    assert "1 member(s) missing, first predictions/prediction_5.json" in failure(archive, "members")


def test_reordered_members(archive: Path) -> None:
    def swap(members: list[Member]) -> list[Member]:
        members[3], members[4] = members[4], members[3]
        return members

    forge(archive, swap)
    detail = failure(archive, "members")
    assert "member 'predictions/prediction_1.json' where the manifest lists" in detail


def _replace(index: int, info: tarfile.TarInfo) -> object:
    def transform(members: list[Member]) -> list[Member]:
        members[index] = Member(info, b"")
        return members

    return transform


def test_symlink_member(archive: Path) -> None:
    link = tarfile.TarInfo("predictions/prediction_0.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    forge(archive, _replace(3, link))  # type: ignore[arg-type]
    assert "is not a regular file" in failure(archive, "members")


def test_hard_link_and_device_members(archive: Path) -> None:
    for kind in (tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.DIRTYPE, tarfile.FIFOTYPE):
        info = tarfile.TarInfo("predictions/prediction_0.json")
        info.type = kind
        info.linkname = "run_meta.json" if kind == tarfile.LNKTYPE else ""
        forge(archive, _replace(3, info))  # type: ignore[arg-type]
        assert "is not a regular file" in failure(archive, "members"), kind


@pytest.mark.parametrize("name", ["../evil", "predictions/../../evil", "/etc/passwd"])
def test_unsafe_member_paths(archive: Path, name: str) -> None:
    def rename(members: list[Member]) -> list[Member]:
        members[3].info.name = name
        return members

    forge(archive, rename)
    assert f"unsafe member path {name!r}" in failure(archive, "members")


def test_manifest_must_come_first(archive: Path) -> None:
    forge(archive, lambda members: [*members[1:], members[0]])
    assert "the first member must be manifest.json" in failure(archive, "members")


def test_manifest_with_a_foreign_layout(archive: Path) -> None:
    def relayout(members: list[Member]) -> list[Member]:
        manifest = json.loads(members[0].data)
        manifest["files"][2]["path"] = "predictions/extra.json"
        members[3].info.name = "predictions/extra.json"
        return [manifest_member(manifest), *members[1:]]

    forge(archive, relayout)
    assert failure(archive, "manifest") == "file list is not the bundle layout"


def test_manifest_that_does_not_parse(archive: Path) -> None:
    def garble(members: list[Member]) -> list[Member]:
        manifest = json.loads(members[0].data)
        del manifest["bundle_id"]
        return [manifest_member(manifest), *members[1:]]

    forge(archive, garble)
    assert "missing field 'bundle_id'" in failure(archive, "manifest")


# Claims recomputed from the files, against a careful forger who fixes every digest ----------


def forge_consistently(archive: Path, transform: object) -> None:
    forge(
        archive,
        lambda members: refresh_manifest(transform(members)),  # type: ignore[operator]
        sidecar_from_manifest=True,
    )


def edit_manifest(change: object) -> object:
    def transform(members: list[Member]) -> list[Member]:
        manifest = json.loads(members[0].data)
        change(manifest)  # type: ignore[operator]
        return [manifest_member(manifest), *members[1:]]

    return transform


def test_run_meta_that_does_not_parse(archive: Path) -> None:
    def break_meta(members: list[Member]) -> list[Member]:
        members[1].data = b'{"model_name": "x"'
        return members

    forge_consistently(archive, break_meta)
    assert "run_meta.json: not valid JSON" in failure(archive, "contents")


def test_metrics_that_is_not_an_object_of_objects(archive: Path) -> None:
    def break_metrics(members: list[Member]) -> list[Member]:
        members[2].data = b'{"accuracy": 0.9}'
        return members

    forge_consistently(archive, break_metrics)
    assert "scorer 'accuracy' maps to float" in failure(archive, "contents")


def test_prediction_whose_index_disagrees_with_its_name(archive: Path) -> None:
    def swap_content(members: list[Member]) -> list[Member]:
        members[3].data, members[4].data = members[4].data, members[3].data
        return members

    forge_consistently(archive, swap_content)
    assert "index 1 disagrees with the file name's index 0" in failure(archive, "contents")


def test_manifest_identity_must_match_run_meta(archive: Path) -> None:
    def new_capabilities(members: list[Member]) -> list[Member]:
        meta = json.loads(members[1].data)
        meta["capabilities"]["reasoning_effort"] = "low"
        members[1].data = json.dumps(meta, indent=2).encode()
        return members

    forge_consistently(archive, new_capabilities)
    detail = failure(archive, "identity")
    assert detail.startswith("manifest disagrees with run_meta.json on bundle_id")
    assert "capability_fingerprint" in detail


@pytest.mark.parametrize(
    ("field", "value"),
    [("model_name", "gpt-6"), ("run_date", "2027-01-01T00:00:00Z"), ("player_type", "human")],
)
def test_manifest_claims_that_run_meta_does_not_make(archive: Path, field: str, value: str) -> None:
    forge_consistently(archive, edit_manifest(lambda manifest: manifest.update({field: value})))
    assert field in failure(archive, "identity")


def test_prediction_counts_must_match_the_files(archive: Path) -> None:
    def hide_an_error(members: list[Member]) -> list[Member]:
        record = json.loads(members[6].data)  # prediction_3 carries an error
        assert record["error"] is not None
        record["error"] = None
        members[6].data = json.dumps(record).encode()
        return members

    forge_consistently(archive, hide_an_error)
    assert "counts or usage differ" in failure(archive, "predictions")


def test_claimed_complete_coverage_that_the_files_do_not_support(tmp_path: Path) -> None:
    report, _ = build(
        tmp_path,
        [RunSpec(rows=3)],
        CollectOptions(expected_rows={"expert-vqa": 10}, allow_partial=True),
    )
    archive = Path(only_bundle(report).archive)

    def claim_complete(manifest: dict[str, object]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": 10, "rows_present": 3}

    forge_consistently(archive, edit_manifest(claim_complete))
    assert failure(archive, "coverage") == "manifest claims complete, the files show partial"


def test_claimed_complete_without_a_row_count(archive: Path) -> None:
    def unknown_rows(manifest: dict[str, object]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": None, "rows_present": ROWS}

    forge_consistently(archive, edit_manifest(unknown_rows))
    assert failure(archive, "coverage") == "manifest claims complete, the files show unknown"


def test_gapped_bundle_claiming_complete(tmp_path: Path) -> None:
    report, _ = build(
        tmp_path,
        [RunSpec(indices=[0, 1, 3])],
        CollectOptions(expected_rows={"expert-vqa": 4}, allow_partial=True),
    )
    archive = Path(only_bundle(report).archive)

    def claim_complete(manifest: dict[str, object]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": 3, "rows_present": 3}

    forge_consistently(archive, edit_manifest(claim_complete))
    assert failure(archive, "coverage") == "manifest claims complete, the files show partial"


# Sidecar and location --------------------------------------------------------------------------


def test_sidecar_that_disagrees_with_the_manifest(archive: Path) -> None:
    original = json.loads(sidecar_path(archive).read_text())
    rewrite_sidecar(archive, player_name="someone-else")
    assert failure(archive, "sidecar") == "sidecar claims differ from the manifest"
    rewrite_sidecar(archive, player_name=original["player_name"], files_count=ROWS + 5)
    assert failure(archive, "sidecar") == "sidecar claims differ from the manifest"
    rewrite_sidecar(archive, files_count=ROWS + 2)
    assert read_bundle(archive).verification().ok


def test_sidecar_with_a_wrong_digest_or_size(archive: Path) -> None:
    sidecar = json.loads(sidecar_path(archive).read_text())
    wrong = copy.deepcopy(sidecar)
    wrong["archive"]["size"] += 1
    sidecar_path(archive).write_text(json.dumps(wrong))
    assert "differs from the sidecar's" in failure(archive, "archive-digest")
    wrong = copy.deepcopy(sidecar)
    wrong["archive"]["sha256"] = "0" * 64
    sidecar_path(archive).write_text(json.dumps(wrong))
    assert "differs from the sidecar's" in failure(archive, "archive-digest")


def test_sidecar_missing_or_unreadable(archive: Path) -> None:
    sidecar_path(archive).write_text("{}")
    assert "missing field" in failure(archive, "sidecar")
    sidecar_path(archive).unlink()
    assert failure(archive, "sidecar").endswith(".json is missing")


def test_renamed_archive_fails_the_location_check(archive: Path) -> None:
    moved = archive.with_name("expert-vqa@ffffffff.tar.zst")
    archive.rename(moved)
    sidecar_path(archive).rename(sidecar_path(moved))
    detail = failure(moved, "location")
    assert detail.startswith(f"file is at {archive.parent.name}/expert-vqa@ffffffff.tar.zst")
    assert detail.endswith(f"says {archive.parent.name}/{archive.name}")


def test_archive_moved_to_another_player_directory(archive: Path) -> None:
    other = archive.parent.parent / "someone_00000000"
    other.mkdir()
    archive.rename(other / archive.name)
    sidecar_path(archive).rename(sidecar_path(other / archive.name))
    assert "its bundle id says" in failure(other / archive.name, "location")


# Decompression bombs ---------------------------------------------------------------------------


class Zeros:
    """A file object that reads as `size` zero bytes without holding them."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return bytes(size)


def write_bomb(
    archive: Path, members: list[Member], huge: tarfile.TarInfo | None, tail: int
) -> None:
    """Members as given, then optionally a member whose header declares `huge.size` bytes of
    zeros, then `tail` zero bytes after the tar's end, all in one checksummed zstd frame."""
    compressor = zstandard.ZstdCompressor(level=1, write_checksum=True)
    with archive.open("wb") as raw, compressor.stream_writer(raw) as stream:
        with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for member in members:
                member.info.size = len(member.data)
                tar.addfile(member.info, Zeros(0) if not member.data else _bytes(member.data))
            if huge is not None:
                tar.addfile(huge, Zeros(huge.size))
        chunk = bytes(1 << 20)
        for _ in range(tail >> 20):
            stream.write(chunk)
    rewrite_sidecar(archive)


def _bytes(data: bytes) -> object:
    import io

    return io.BytesIO(data)


BOMB_SIZE = 512 << 20


def assert_fails_fast(archive: Path, tmp_path: Path, detail: str) -> None:
    started = time.monotonic()
    result = run_cli_measured("verify", archive, workdir=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert detail in result.stderr
    assert elapsed < 15
    assert result.max_rss_kib < 200 * 1024, result.max_rss_kib  # far below the bomb's size
    print(f"verify peak RSS {result.max_rss_kib // 1024} MiB in {elapsed:.2f} s")


def test_member_larger_than_the_manifest_says_stops_at_its_header(
    archive: Path, tmp_path: Path
) -> None:
    members = read_members(archive)
    huge = tarfile.TarInfo("metrics.json")
    huge.size = BOMB_SIZE
    write_bomb(archive, members[:2], huge, 0)
    assert archive.stat().st_size < 1 << 20
    assert_fails_fast(archive, tmp_path, "member 'metrics.json' is 536870912 bytes")


def test_data_beyond_what_the_manifest_declares_stops_early(archive: Path, tmp_path: Path) -> None:
    write_bomb(archive, read_members(archive), None, BOMB_SIZE)
    assert archive.stat().st_size < 1 << 20
    assert_fails_fast(archive, tmp_path, "decompressed data exceeds the")
    assert failure(archive, "size").startswith("decompressed data exceeds the")


def test_implausibly_large_manifest_is_not_read(archive: Path, tmp_path: Path) -> None:
    huge = tarfile.TarInfo("manifest.json")
    huge.size = 100 << 20
    write_bomb(archive, [], huge, 0)
    assert_fails_fast(archive, tmp_path, "manifest.json is implausibly large")


def test_non_zero_data_after_the_tar_end(archive: Path) -> None:
    data = tar_bytes(read_members(archive)) + b"\x01" * 512
    archive.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    rewrite_sidecar(archive)
    assert failure(archive, "members") == "data after the end of the tar archive"


def test_anything_but_a_bundle_archive_is_unusable_input(archive: Path, tmp_path: Path) -> None:
    """A sidecar, any other file, or a folder without bundles: exit 2, never a bogus
    "….json.json is missing" failure (issue 6)."""
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    empty = tmp_path / "empty"
    empty.mkdir()
    for path in (sidecar_path(archive), other, empty):
        with pytest.raises(UsageError, match=r"not a \.tar\.zst bundle"):
            verify([path])
        result = run_cli("verify", path)
        assert result.returncode == 2, result.stderr
        assert "not a .tar.zst bundle" in one_line_error(result.stderr)
        assert ".json.json" not in result.stderr
    assert (
        "a sidecar's archive is the .tar.zst beside it"
        in run_cli("verify", sidecar_path(archive)).stderr
    )


def test_bundles_are_found_below_a_tree_deeper_than_the_recursion_limit(
    archive: Path, tmp_path: Path
) -> None:
    bundles = archive.parent.parent
    with nested_folders(bundles / "deep", 1200) as bottom:
        (bottom / "stray.tar.zst").write_bytes(b"not a bundle")
        report = verify([bundles])
    assert [bundle.archive for bundle in report.bundles] == [
        str(bottom / "stray.tar.zst"),
        str(archive),
    ]
    assert not report.bundles[0].ok and report.bundles[1].ok
