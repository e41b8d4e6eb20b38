"""verify: every check proved by a bundle tampered with by hand (real tarfile, real zstd).

Most forgeries are consistent: the members re-hashed into the manifest, the manifest in
collect's layout, the three zstd frames with checksums, the sidecar matching the forged bytes.
What is left for verify to catch is exactly what the test is about.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from factory import RunSpec
from helpers import (
    FRAME_LEVEL,
    Member,
    build,
    bundle_frames,
    compress,
    edit_manifest,
    forge,
    forge_consistently,
    frame,
    json_bytes,
    manifest_member,
    member_bytes,
    nested_folders,
    one_line_error,
    only_bundle,
    read_manifest,
    read_members,
    refresh_manifest,
    regular,
    rewrite_sidecar,
    run_cli,
    run_cli_measured,
    sidecar_from_manifest,
    sidecar_path,
    tar_bytes,
    with_data,
)

from bundler.core.errors import UsageError
from bundler.core.limits import MAX_METRICS_BYTES, MAX_PREDICTION_BYTES, MAX_RUN_META_BYTES
from bundler.local import readahead
from bundler.local import runs as runs_module
from bundler.local import verify as verify_module
from bundler.local.collect import CollectOptions
from bundler.local.runs import PROGRESS_BATCH
from bundler.local.verify import BundleReading, verify
from bundler.local.verifymanifest import MAX_MANIFEST_BYTES, first_difference
from bundler.local.zstdframes import FrameReader

ROWS = 6
MAX_RSS_MIB = 150
READ_AHEAD_MIN_BYTES = readahead.READ_AHEAD_MIN_BYTES
"""The console script's, which the fixture below does not reach."""


def read_bundle(path: Path) -> BundleReading:
    """verify's reading of one bundle, made both ways it reads an archive: in the caller's own
    thread (a small archive) and read ahead by a thread (a large one; forced here, in reads of
    a few kilobytes, so that a small test bundle passes through its queue in many pieces). Both
    must come to the same checks and claim."""
    in_line = verify_module.read_bundle(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readahead, "READ_AHEAD_MIN_BYTES", 0)
        patch.setattr(FrameReader.__init__, "__defaults__", (4096,))  # its chunk_size
        ahead = verify_module.read_bundle(path)
    assert (ahead.checks, ahead.claim) == (in_line.checks, in_line.claim)
    return in_line


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
    failed = [check for check in reading.checks if check.name == name and check.status == "failed"]
    assert failed, (name, reading.checks)
    return failed[0].detail


def mtime_of(members: list[Member]) -> int:
    return members[0].info.mtime


def test_a_good_bundle_passes_every_check(archive: Path) -> None:
    assert statuses(archive) == {
        "manifest": "passed",
        "zstd": "passed",
        "members": "passed",
        "contents": "passed",
        "claim": "passed",
        "archive-digest": "passed",
        "sidecar": "passed",
        "location": "passed",
    }
    report = verify([archive])
    assert report.exit_code == 0 and report.bundles[0].bundle_id is not None


def test_the_forging_helpers_reproduce_collects_bytes(archive: Path) -> None:
    """Forging without a change gives back the very bytes collect wrote, so every forgery
    below differs from a real bundle only by what it means to test."""
    original, sidecar = archive.read_bytes(), sidecar_path(archive).read_bytes()
    forge_consistently(archive, lambda members: members)
    assert archive.read_bytes() == original
    assert sidecar_path(archive).read_bytes() == sidecar


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


def test_a_bundle_with_left_out_files_verifies(tmp_path: Path) -> None:
    """The left-out files are an input the manifest records, so their warning is derived."""
    report, _ = build(tmp_path, [RunSpec(rows=2)], name="first")
    run_dir = Path(report.bundles[0].run_directory)
    for name in ("notes.md", "b\udc80d.txt", *(f"extra_{n:02d}.log" for n in range(11))):
        (run_dir / name).write_bytes(b"x")
    report, _ = build(tmp_path, [], name="second")
    bundle = only_bundle(report)
    manifest = read_manifest(Path(bundle.archive))
    assert manifest["inputs"]["left_out"]["count"] == 13
    assert manifest["inputs"]["left_out"]["shown"][0] == "b\\x80d.txt"
    assert any(w.startswith("left out 13 unknown") for w in manifest["warnings"])
    assert read_bundle(Path(bundle.archive)).verification().ok


# The zstd frames ---------------------------------------------------------------------------------


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def test_flipped_byte_fails_the_sidecar_digest_and_the_stream(archive: Path) -> None:
    flip(archive, archive.stat().st_size // 2)
    result = statuses(archive)
    assert result["archive-digest"] == "failed"
    assert not read_bundle(archive).verification().ok


def test_flipped_checksum_fails_zstd_even_with_a_matching_sidecar(archive: Path) -> None:
    flip(archive, archive.stat().st_size - 2)  # inside the last frame's 4-byte checksum
    rewrite_sidecar(archive)
    result = statuses(archive)
    assert result["archive-digest"] == "passed"
    assert "corrupt compressed data" in failure(archive, "zstd")


@pytest.mark.parametrize("number", [1, 2, 3])
def test_a_frame_without_checksum_is_refused(archive: Path, number: int) -> None:
    checksums = tuple(position != number for position in (1, 2, 3))
    forge(archive, lambda members: members, checksums=checksums)  # type: ignore[arg-type]
    assert failure(archive, "zstd") == (
        f"not a canonical bundle: zstd frame {number} carries no checksum"
    )


def write_frames(archive: Path, frames: list[bytes]) -> None:
    archive.write_bytes(b"".join(frames))
    rewrite_sidecar(archive)


def skippable(payload: bytes) -> bytes:
    return (0x184D2A50).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


def test_skippable_frames_are_refused(archive: Path) -> None:
    frames = bundle_frames(read_members(archive))
    write_frames(archive, [frames[0], skippable(b"hidden"), frames[1], frames[2]])
    assert "a skippable zstd frame at byte" in failure(archive, "zstd")
    write_frames(archive, [*frames, skippable(b"hidden")])
    assert "a skippable zstd frame at byte" in failure(archive, "zstd")


def test_trailing_bytes_and_extra_frames_are_refused(archive: Path) -> None:
    frames = bundle_frames(read_members(archive))
    write_frames(archive, [*frames, b"\x00" * 7])
    assert failure(archive, "zstd").endswith("7 byte(s) after the last zstd frame")
    write_frames(archive, [*frames, frame(b"")])
    assert "a zstd frame after the 3 that collect writes" in failure(archive, "zstd")


def test_fewer_frames_or_another_split_is_refused(archive: Path) -> None:
    members = read_members(archive)
    frames = bundle_frames(members)
    write_frames(archive, frames[:2])
    assert failure(archive, "zstd").endswith(
        "the archive ends after 2 zstd frame(s); collect writes 3"
    )
    whole = b"".join(member_bytes(member) for member in members) + bytes(10240)
    cut = len(member_bytes(members[0]))
    write_frames(archive, [frame(whole[: cut + 512]), frame(whole[cut + 512 :]), frame(b"")])
    assert "more than manifest.json in its zstd frame" in failure(archive, "members")
    write_frames(archive, [frame(whole[: cut - 512]), frame(whole[cut - 512 :]), frame(b"")])
    assert f"a zstd frame ends inside a member, at byte {cut - 512}" in failure(archive, "members")


def test_a_frame_as_a_plain_zstd_tool_writes_it_is_refused(archive: Path) -> None:
    """One-shot compression records the content size, which collect's streams never do."""
    archive.write_bytes(compress(tar_bytes(read_members(archive))))
    rewrite_sidecar(archive)
    assert "zstd frame 1 has header flags" in failure(archive, "zstd")


def test_not_zstd_at_all(archive: Path) -> None:
    archive.write_bytes(tar_bytes(read_members(archive)))
    rewrite_sidecar(archive)
    assert failure(archive, "zstd").endswith("not a zstd stream (no zstd magic number)")


def test_truncated_archive(archive: Path) -> None:
    archive.write_bytes(archive.read_bytes()[:-2])  # within the last frame's checksum
    rewrite_sidecar(archive)
    assert failure(archive, "zstd").endswith("the archive ends inside zstd frame 3")


def test_frames_must_use_the_window_of_the_level_the_manifest_records(archive: Path) -> None:
    def level_19(manifest: dict[str, Any]) -> None:
        manifest["inputs"]["level"] = 19

    forge_consistently(archive, edit_manifest(level_19))
    assert "zstd frame 1 has a 2097152-byte window; level 19" in failure(archive, "zstd")


def test_a_window_larger_than_any_level_uses_is_refused(archive: Path) -> None:
    data = bytearray(archive.read_bytes())
    data[5] = 0x78  # window descriptor: 2**25 bytes, level 20's
    archive.write_bytes(bytes(data))
    rewrite_sidecar(archive)
    assert "needs a 33554432-byte window" in failure(archive, "zstd")


# Tar headers -----------------------------------------------------------------------------------


def test_pax_comment_before_the_manifest_is_refused_at_once(archive: Path, tmp_path: Path) -> None:
    """tarfile parses a crafted PAX header in quadratic time; the canonical reader refuses
    the header's type before reading any of it."""

    def comment(members: list[Member]) -> list[Member]:
        members = refresh_manifest(members)
        members[0].info.pax_headers = {"comment": "x" * (1 << 20)}
        return members

    forge(archive, comment, sidecar_from_claim=True)
    assert archive.stat().st_size < 64 << 10
    started = time.monotonic()
    result = run_cli_measured("verify", archive, workdir=tmp_path)
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    assert "a PAX extended header" in result.stderr
    assert "collect writes plain ustar headers only" in result.stderr


def replace_member(index: int, change: Callable[[tarfile.TarInfo], None]) -> Callable[..., Any]:
    def transform(members: list[Member]) -> list[Member]:
        change(members[index].info)
        return members

    return transform


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("mode", lambda info: setattr(info, "mode", 0o755)),
        ("uid", lambda info: setattr(info, "uid", 1000)),
        ("gid", lambda info: setattr(info, "gid", 1000)),
        ("uname", lambda info: setattr(info, "uname", "root")),
        ("gname", lambda info: setattr(info, "gname", "wheel")),
    ],
)
def test_header_fields_other_than_collects_are_refused(
    archive: Path, field: str, change: Callable[[tarfile.TarInfo], None]
) -> None:
    forge(archive, replace_member(4, change))
    detail = failure(archive, "members")
    assert f"member 'predictions/prediction_1.json': {field} is" in detail
    assert "collect writes" in detail


def test_a_member_with_another_mtime_is_refused(archive: Path) -> None:
    forge(archive, replace_member(4, lambda info: setattr(info, "mtime", info.mtime + 1)))
    assert "member 'predictions/prediction_1.json' has mtime" in failure(archive, "members")


def test_every_mtime_must_be_the_run_date(archive: Path) -> None:
    def shift(members: list[Member]) -> list[Member]:
        for member in members:
            member.info.mtime += 3600
        return members

    forge(archive, shift)
    assert "is not the run date 2026-06-15T10:42:22.045588909Z" in failure(archive, "members")


def test_gnu_long_name_header_is_refused(archive: Path) -> None:
    long_name = "predictions/" + "x" * 120 + ".json"

    def gnu(members: list[Member]) -> list[Member]:
        info = copy.copy(members[3].info)
        info.name = long_name
        members[3] = Member(info, members[3].data, info.tobuf(tarfile.GNU_FORMAT, "utf-8"))
        manifest = json.loads(members[0].data)
        manifest["files"][2]["path"] = long_name
        return [manifest_member(manifest, mtime_of(members)), *members[1:]]

    forge_consistently(archive, gnu)
    assert "a GNU long-name header" in failure(archive, "members")


def test_symlink_member(archive: Path) -> None:
    def link(info: tarfile.TarInfo) -> None:
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"

    forge(archive, replace_member(3, link))
    assert "is not a regular file" in failure(archive, "members")


@pytest.mark.parametrize(
    "kind", [tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.DIRTYPE, tarfile.FIFOTYPE]
)
def test_hard_link_and_device_members(archive: Path, kind: bytes) -> None:
    def retype(info: tarfile.TarInfo) -> None:
        info.type = kind
        info.linkname = "run_meta.json" if kind == tarfile.LNKTYPE else ""

    forge(archive, replace_member(3, retype))
    assert "is not a regular file" in failure(archive, "members")


@pytest.mark.parametrize("name", ["../evil", "predictions/../../evil", "/etc/passwd"])
def test_unsafe_member_paths(archive: Path, name: str) -> None:
    def rename(members: list[Member]) -> list[Member]:
        members[3].info.name = name
        return members

    forge(archive, rename)
    assert f"member {name!r} where collect writes" in failure(archive, "members")


def test_padding_must_be_zeros(archive: Path) -> None:
    members = read_members(archive)
    raw = [member_bytes(member) for member in members]
    raw[3] = raw[3][:-1] + b"\x01"  # the last byte of prediction_0's padding
    head, body = raw[0], b"".join(raw[1:])
    end = bytes(1024 + -(len(head) + len(body) + 1024) % 10240)
    write_frames(archive, [frame(head), frame(body), frame(end)])
    assert "is not zeros" in failure(archive, "members")


def test_the_end_of_archive_must_be_exact(archive: Path) -> None:
    members = read_members(archive)
    frames = bundle_frames(members)
    head = len(member_bytes(members[0]))
    body = sum(len(member_bytes(member)) for member in members[1:])
    end = bytes(1024 + -(head + body + 1024) % 10240)
    write_frames(archive, [*frames[:2], frame(end + bytes(10240))])
    assert "more than the end-of-archive blocks in its zstd frame" in failure(archive, "members")
    write_frames(archive, [*frames[:2], frame(end[:-1] + b"\x01")])
    assert "does not end with the" in failure(archive, "members")


# Members against the manifest ------------------------------------------------------------------


def test_tampered_member_with_recomputed_archive_fails_its_sha256(archive: Path) -> None:
    def tamper(members: list[Member]) -> list[Member]:
        members[5].data = members[5].data.replace(b"answer", b"ANSWER")
        return members

    forge(archive, tamper)
    assert statuses(archive)["archive-digest"] == "passed"
    detail = failure(archive, "contents")
    assert detail == "predictions/prediction_2.json: sha256 differs from the manifest"


def test_extra_member(archive: Path) -> None:
    def extra(members: list[Member]) -> list[Member]:
        return [*members, regular("predictions/prediction_99.json", b"{}", mtime_of(members))]

    forge(archive, extra)
    detail = failure(archive, "members")
    assert detail == "unexpected member 'predictions/prediction_99.json' not in the manifest"


def test_missing_member(archive: Path) -> None:
    forge(archive, lambda members: members[:-1])
    assert failure(archive, "members") == "member(s) missing, first predictions/prediction_5.json"


def test_reordered_members(archive: Path) -> None:
    def swap(members: list[Member]) -> list[Member]:
        members[3], members[4] = members[4], members[3]
        return members

    forge(archive, swap)
    detail = failure(archive, "members")
    assert detail == (
        "member 'predictions/prediction_1.json' where the manifest lists "
        "'predictions/prediction_0.json'"
    )


def test_member_sizes_must_match_the_manifest(archive: Path) -> None:
    def grow(members: list[Member]) -> list[Member]:
        members[4] = with_data(members[4], members[4].data + b" ")
        return members

    forge(archive, grow)
    assert "member 'predictions/prediction_1.json' is" in failure(archive, "members")
    assert "bytes, the manifest says" in failure(archive, "members")


def test_manifest_must_come_first(archive: Path) -> None:
    forge(archive, lambda members: [*members[1:], members[0]])
    assert failure(archive, "members") == "the first member must be manifest.json"


def test_predictions_must_be_named_and_ordered_as_collect_does(archive: Path) -> None:
    def relayout(members: list[Member]) -> list[Member]:
        manifest = json.loads(members[0].data)
        manifest["files"][2]["path"] = "predictions/extra.json"
        members[3].info.name = "predictions/extra.json"
        return [manifest_member(manifest, mtime_of(members)), *members[1:]]

    forge_consistently(archive, relayout)
    detail = failure(archive, "members")
    assert detail.startswith("member 'predictions/extra.json' where collect writes")


def test_leading_zeros_in_a_prediction_name_are_refused(archive: Path) -> None:
    def zeros(members: list[Member]) -> list[Member]:
        manifest = json.loads(members[0].data)
        manifest["files"][2]["path"] = "predictions/prediction_00.json"
        members[3].info.name = "predictions/prediction_00.json"
        return [manifest_member(manifest, mtime_of(members)), *members[1:]]

    forge_consistently(archive, zeros)
    assert "member 'predictions/prediction_00.json' where" in failure(archive, "members")


def test_manifest_that_does_not_parse(archive: Path) -> None:
    forge_consistently(archive, edit_manifest(lambda manifest: manifest.pop("bundle_id")))
    assert "missing field 'bundle_id'" in failure(archive, "manifest")


def test_a_version_1_manifest_is_refused_with_a_hint(archive: Path) -> None:
    forge_consistently(archive, edit_manifest(lambda manifest: manifest.update(manifest_version=1)))
    reading = read_bundle(archive)
    (check,) = [check for check in reading.checks if check.name == "manifest"]
    assert check.status == "failed" and "manifest_version" in check.detail
    assert check.hint is not None and "manifest version 2" in check.hint


def test_a_manifest_in_another_layout_is_refused(archive: Path) -> None:
    def compact(members: list[Member]) -> list[Member]:
        members[0] = with_data(members[0], json.dumps(json.loads(members[0].data)).encode())
        return members

    forge(archive, compact)
    assert failure(archive, "manifest").startswith("no file list where collect writes it")


# Claims derived from the files, against a careful forger who fixes every digest ---------------


def test_run_meta_that_does_not_parse(archive: Path) -> None:
    def break_meta(members: list[Member]) -> list[Member]:
        members[1] = with_data(members[1], b'{"model_name": "x"')
        return members

    forge_consistently(archive, break_meta)
    assert "run_meta.json: not valid JSON" in failure(archive, "contents")


def test_metrics_that_is_not_an_object_of_objects(archive: Path) -> None:
    def break_metrics(members: list[Member]) -> list[Member]:
        members[2] = with_data(members[2], b'{"accuracy": 0.9}')
        return members

    forge_consistently(archive, break_metrics)
    assert "scorer 'accuracy' maps to float" in failure(archive, "contents")


def test_prediction_whose_index_disagrees_with_its_name(archive: Path) -> None:
    def swap_content(members: list[Member]) -> list[Member]:
        one, two = members[3].data, members[4].data
        members[3], members[4] = with_data(members[3], two), with_data(members[4], one)
        return members

    forge_consistently(archive, swap_content)
    assert "index 1 disagrees with the file name's index 0" in failure(archive, "contents")


def claim_failure(archive: Path) -> str:
    return failure(archive, "claim")


def test_manifest_identity_must_match_run_meta(archive: Path) -> None:
    def new_capabilities(members: list[Member]) -> list[Member]:
        meta = json.loads(members[1].data)
        meta["capabilities"]["reasoning_effort"] = "low"
        members[1] = with_data(members[1], json.dumps(meta, indent=2).encode())
        return members

    forge_consistently(archive, new_capabilities)
    detail = claim_failure(archive)
    assert detail.startswith("manifest.json is not what collect derives from the files: bundle_id")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_name", "gpt-6"),
        ("run_date", "2027-01-01T00:00:00Z"),
        ("player_type", "human"),
        ("target", "expert-vqa@ffffffff"),
        ("capability_fingerprint", "0" * 32),
    ],
)
def test_manifest_claims_that_run_meta_does_not_make(archive: Path, field: str, value: str) -> None:
    forge_consistently(archive, edit_manifest(lambda manifest: manifest.update({field: value})))
    assert f": {field} is {json.dumps(value)}, collect writes" in claim_failure(archive)


@pytest.mark.parametrize(
    ("field", "value"),
    [("target", "maze@a1b2c3d4"), ("is_pinned", False), ("revision_label", "unpinned")],
)
def test_computed_statics_fields_in_the_manifest(archive: Path, field: str, value: Any) -> None:
    def change(manifest: dict[str, Any]) -> None:
        manifest["statics"][field] = value

    forge_consistently(archive, edit_manifest(change))
    assert f"statics.{field} is {json.dumps(value)}" in claim_failure(archive)


def test_prediction_counts_must_match_the_files(archive: Path) -> None:
    def hide_an_error(members: list[Member]) -> list[Member]:
        record = json.loads(members[6].data)  # prediction_3 carries an error
        assert record["error"] is not None
        record["error"] = None
        members[6] = with_data(members[6], json.dumps(record).encode())
        return members

    forge_consistently(archive, hide_an_error)
    assert "predictions.errors is 1, collect writes 0" in claim_failure(archive)


def test_lowered_expected_rows_with_more_rows_present_is_refused(archive: Path) -> None:
    """With 3 expected and 6 present, the coverage would come out `complete`; but collect
    refuses such a run, and verify derives what collect would do."""

    def lower(manifest: dict[str, Any]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": 3, "rows_present": ROWS}

    forge_consistently(archive, edit_manifest(lower))
    detail = claim_failure(archive)
    assert detail.startswith("collect would refuse these files: prediction index 5 is beyond")


def test_claimed_complete_coverage_that_the_files_do_not_support(tmp_path: Path) -> None:
    report, _ = build(
        tmp_path,
        [RunSpec(rows=3)],
        CollectOptions(expected_rows={"expert-vqa": 10}, allow_partial=True),
    )
    archive = Path(only_bundle(report).archive)

    def claim_complete(manifest: dict[str, Any]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": 10, "rows_present": 3}

    forge_consistently(archive, edit_manifest(claim_complete))
    assert 'coverage.status is "complete", collect writes "partial"' in claim_failure(archive)


def test_claimed_complete_without_a_row_count(archive: Path) -> None:
    def unknown_rows(manifest: dict[str, Any]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": None, "rows_present": ROWS}

    forge_consistently(archive, edit_manifest(unknown_rows))
    assert 'coverage.status is "complete", collect writes "unknown"' in claim_failure(archive)


def test_gapped_bundle_claiming_complete(tmp_path: Path) -> None:
    report, _ = build(
        tmp_path,
        [RunSpec(indices=[0, 1, 3])],
        CollectOptions(expected_rows={"expert-vqa": 4}, allow_partial=True),
    )
    archive = Path(only_bundle(report).archive)

    def claim_complete(manifest: dict[str, Any]) -> None:
        manifest["coverage"] = {"status": "complete", "expected_rows": 3, "rows_present": 3}

    forge_consistently(archive, edit_manifest(claim_complete))
    assert claim_failure(archive).startswith("collect would refuse these files: prediction index 3")


def test_emptied_warnings_are_refused(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [RunSpec(rows=3, resolved_revision=None)])
    archive = Path(only_bundle(report).archive)
    assert read_manifest(archive)["warnings"]
    forge_consistently(archive, edit_manifest(lambda manifest: manifest.update(warnings=[])))
    assert "warnings is [], collect writes [" in claim_failure(archive)


def add_note(manifest: dict[str, Any]) -> None:
    note = "row count not resolved: the Hub was unreachable"
    manifest["inputs"]["row_count_note"] = note
    manifest["warnings"].insert(0, note)


def test_a_row_count_note_is_an_input_its_warning_is_derived(tmp_path: Path) -> None:
    """What --resolve-rows found out is recorded; the warning must then say it, first."""
    report, _ = build(tmp_path, [RunSpec(rows=3)])
    archive = Path(only_bundle(report).archive)
    forge_consistently(archive, edit_manifest(add_note))
    assert read_bundle(archive).verification().ok

    def drop_warning(manifest: dict[str, Any]) -> None:
        manifest["warnings"].pop(0)

    forge_consistently(archive, edit_manifest(drop_warning))
    assert claim_failure(archive).endswith(
        'warnings[0] is "coverage unknown: 3 rows present; pass --expect expert-vqa=ROWS", '
        'collect writes "row count not resolved: the Hub was unreachable"'
    )


def test_inputs_collect_never_records_are_refused(archive: Path) -> None:
    forge_consistently(archive, edit_manifest(add_note))  # with a known row count
    assert "row_count_note is set although the row count is known" in failure(archive, "manifest")

    def odd_left_out(manifest: dict[str, Any]) -> None:
        manifest["inputs"]["left_out"] = {"count": 0, "shown": ["a"]}

    forge_consistently(archive, edit_manifest(odd_left_out))
    assert "left_out shows 1 names of 0" in failure(archive, "manifest")


# The sidecar ---------------------------------------------------------------------------------


def sidecar_failure(archive: Path) -> str:
    return failure(archive, "sidecar")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("statics", "target"), "expert-vqa@ffffffff"),
        (("statics", "is_pinned"), False),
        (("statics", "revision_label"), "unpinned"),
        (("target",), "expert-vqa@ffffffff"),
        (("player_name",), "someone-else"),
        (("files_count",), ROWS + 5),
        (("warnings",), []),
    ],
)
def test_sidecar_must_be_exactly_what_collect_writes(
    archive: Path, path: tuple[str, ...], value: Any
) -> None:
    """upload publishes the sidecar's bytes as they are, so every field counts, the computed
    ones that pydantic ignores when it parses included."""

    def edit(sidecar: dict[str, Any]) -> None:
        target = sidecar
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    rewrite_sidecar(archive, edit)
    assert statuses(archive)["archive-digest"] == "passed"
    detail = sidecar_failure(archive)
    assert detail.startswith(f"{sidecar_path(archive).name} is not what collect writes")
    assert f"{'.'.join(path)} is {json.dumps(value)}, collect writes" in detail


def test_sidecar_must_name_its_own_archive(archive: Path) -> None:
    rewrite_sidecar(archive, name="../../../etc/passwd")
    assert 'archive.name is "../../../etc/passwd", collect writes' in sidecar_failure(archive)


def test_sidecar_with_other_bytes_for_the_same_values(archive: Path) -> None:
    sidecar = json.loads(sidecar_path(archive).read_bytes())
    sidecar_path(archive).write_text(json.dumps(sidecar))
    assert sidecar_failure(archive).endswith(
        "same values, other bytes (layout, key order or escapes)"
    )


def test_sidecar_with_a_wrong_digest_or_size(archive: Path) -> None:
    sidecar = json.loads(sidecar_path(archive).read_text())
    wrong = copy.deepcopy(sidecar)
    wrong["archive"]["size"] += 1
    sidecar_path(archive).write_bytes(json_bytes(wrong))
    assert "differs from the sidecar's" in failure(archive, "archive-digest")
    assert "archive.size is" in sidecar_failure(archive)
    wrong = copy.deepcopy(sidecar)
    wrong["archive"]["sha256"] = "0" * 64
    sidecar_path(archive).write_bytes(json_bytes(wrong))
    assert "differs from the sidecar's" in failure(archive, "archive-digest")


def test_sidecar_missing_unreadable_or_too_large(archive: Path) -> None:
    sidecar_path(archive).write_text("{}")
    assert "missing field" in sidecar_failure(archive)
    sidecar_path(archive).write_bytes(b" " * (1 << 20))
    assert "is larger than any sidecar collect writes" in sidecar_failure(archive)
    sidecar_path(archive).unlink()
    assert sidecar_failure(archive).endswith(".json is missing")


def test_a_consistent_forgery_of_sidecar_and_manifest_alike_is_refused(archive: Path) -> None:
    """Changing a claim everywhere at once (manifest, sidecar, digests) still fails: the claim
    is derived from the files."""
    forge_consistently(archive, edit_manifest(lambda manifest: manifest.update(model_name="x")))
    assert "model_name" in claim_failure(archive)


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


def test_first_difference_names_the_path_and_respects_types() -> None:
    assert first_difference({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}).path == "a.b[1]"  # type: ignore[union-attr]
    assert first_difference({"n": 6}, {"n": 6.0}).path == "n"  # type: ignore[union-attr]
    assert first_difference({"n": 1}, {"n": True}).path == "n"  # type: ignore[union-attr]
    assert first_difference({"a": 1}, {"a": 1, "b": 2}).path == "b"  # type: ignore[union-attr]
    assert first_difference({"a": 1, "b": 2}, {"b": 2, "a": 1}).path == "(keys)"  # type: ignore[union-attr]
    assert first_difference([1, {"x": None}], [1, {"x": None}]) is None


# Bounded memory and time -------------------------------------------------------------------


def assert_fails_fast(archive: Path, tmp_path: Path, detail: str) -> None:
    started = time.monotonic()
    result = run_cli_measured("verify", archive, workdir=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert detail in result.stderr
    assert elapsed < 15
    assert result.max_rss_kib < MAX_RSS_MIB * 1024, result.max_rss_kib
    print(f"verify peak RSS {result.max_rss_kib // 1024} MiB in {elapsed:.2f} s")


def spaces(total: int, start: bytes) -> Iterator[bytes]:
    """`start`, then spaces up to `total` bytes, a megabyte at a time."""
    yield start
    chunk = b" " * (1 << 20)
    left = total - len(start)
    while left:
        yield chunk[: min(left, len(chunk))]
        left -= min(left, len(chunk))


@pytest.mark.parametrize(
    "lead", [0, READ_AHEAD_MIN_BYTES + (1 << 20)], ids=["in line", "read ahead"]
)
def test_a_huge_declared_prediction_is_refused_at_its_header(
    archive: Path, tmp_path: Path, lead: int
) -> None:
    """A 1.5 GB prediction of spaces (valid JSON), consistently hashed, in a few hundred KB; or
    led by enough megabytes that do not compress that the console script reads it ahead in a
    thread."""
    members = read_members(archive)
    size = 1536 << 20
    start = members[3].data.rstrip(b"}") + b"," + os.urandom(lead)
    digest = hashlib.sha256()
    for piece in spaces(size, start):
        digest.update(piece)
    manifest = json.loads(members[0].data)
    manifest["files"] = manifest["files"][:3]
    manifest["files"][2].update(size=size, sha256=digest.hexdigest())
    head = member_bytes(manifest_member(manifest, mtime_of(members)))
    info = copy.copy(members[3].info)
    info.size = size
    compressor = zstandard.ZstdCompressor(level=FRAME_LEVEL, write_checksum=True, threads=1)
    buffer = io.BytesIO(frame(head))
    buffer.seek(0, io.SEEK_END)
    with compressor.stream_writer(buffer, closefd=False) as writer:
        writer.write(member_bytes(members[1]) + member_bytes(members[2]))
        writer.write(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
        for piece in spaces(size, start):
            writer.write(piece)
        writer.write(bytes(-size % 512))
    archive.write_bytes(buffer.getvalue())  # the end frame is never reached
    sidecar_from_manifest(archive, manifest)
    if lead:
        assert archive.stat().st_size >= READ_AHEAD_MIN_BYTES
    else:
        assert archive.stat().st_size < READ_AHEAD_MIN_BYTES
    assert_fails_fast(
        archive,
        tmp_path,
        f"member 'predictions/prediction_0.json' is {size} bytes, more than the "
        f"{MAX_PREDICTION_BYTES} collect accepts",
    )


def test_a_metrics_member_over_its_limit_is_refused(archive: Path) -> None:
    def grow(members: list[Member]) -> list[Member]:
        members[2] = with_data(members[2], b'{"a": {}}' + b" " * MAX_METRICS_BYTES)
        return members

    forge_consistently(archive, grow)
    detail = failure(archive, "members")
    assert detail == (
        f"member 'metrics.json' is {MAX_METRICS_BYTES + 9} bytes, more than the "
        f"{MAX_METRICS_BYTES} collect accepts"
    )


def test_data_beyond_the_end_of_the_archive_stops_early(archive: Path, tmp_path: Path) -> None:
    members = read_members(archive)
    frames = bundle_frames(members)
    compressor = zstandard.ZstdCompressor(level=FRAME_LEVEL, write_checksum=True, threads=1)
    buffer = io.BytesIO()
    with compressor.stream_writer(buffer, closefd=False) as writer:
        chunk = bytes(1 << 20)
        for _ in range(512):
            writer.write(chunk)
    write_frames(archive, [*frames[:2], buffer.getvalue()])
    assert archive.stat().st_size < 1 << 20
    assert_fails_fast(archive, tmp_path, "more than the end-of-archive blocks in its zstd frame")


def test_implausibly_large_manifest_is_not_read(archive: Path, tmp_path: Path) -> None:
    info = tarfile.TarInfo("manifest.json")
    info.size = MAX_MANIFEST_BYTES + 1
    info.mtime = mtime_of(read_members(archive))
    info.mode = 0o644
    header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    write_frames(archive, [frame(header + bytes(1 << 20))])
    assert_fails_fast(archive, tmp_path, "manifest.json is implausibly large")


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


def test_the_largest_bundle_collect_writes_verifies_within_the_memory_bound(tmp_path: Path) -> None:
    """Every file at its limit, in the JSON that takes the most memory once parsed (arrays of
    empty arrays): collect accepts it, so verify must pass it, and within the bound."""
    report, _ = build(tmp_path, [RunSpec(rows=3, thoughts_chars=10)], name="b")
    run_dir = Path(only_bundle(report).run_directory)

    def nested(limit: int, template: str) -> bytes:
        count = (limit - len(template)) // 3
        return template.replace("NESTED", ",".join(["[]"] * count)).encode()

    meta = json.loads((run_dir / "run_meta.json").read_bytes())
    meta["capabilities"]["tools"] = "NESTED_MARK"
    text = json.dumps(meta).replace('"NESTED_MARK"', "[NESTED]")
    (run_dir / "run_meta.json").write_bytes(nested(MAX_RUN_META_BYTES, text))
    metrics = '{"scorer": {"per_row": [NESTED]}}'
    (run_dir / "metrics.json").write_bytes(nested(MAX_METRICS_BYTES, metrics))
    for index in range(3):
        record = json.loads((run_dir / f"prediction_{index}.json").read_bytes())
        record["exception"] = "NESTED_MARK"
        text = json.dumps(record).replace('"NESTED_MARK"', "[NESTED]")
        (run_dir / f"prediction_{index}.json").write_bytes(nested(MAX_PREDICTION_BYTES, text))
    collected = run_cli_measured(
        "collect",
        tmp_path / "out",
        "-o",
        tmp_path / "big",
        "--expect",
        "expert-vqa=3",
        workdir=tmp_path,
    )
    assert collected.returncode == 0, collected.stderr
    started = time.monotonic()
    result = run_cli_measured("verify", tmp_path / "big", workdir=tmp_path)
    assert result.returncode == 0, result.stderr
    print(
        f"collect peak RSS {collected.max_rss_kib // 1024} MiB; verify peak RSS "
        f"{result.max_rss_kib // 1024} MiB in {time.monotonic() - started:.2f} s"
    )
    assert result.max_rss_kib < MAX_RSS_MIB * 1024, result.max_rss_kib


def test_metrics_that_are_not_utf8_get_a_verdict(archive: Path) -> None:
    """json.loads reads UTF-16 too; the bundle is refused, verify does not crash on it."""

    def utf16(members: list[Member]) -> list[Member]:
        members[2] = with_data(members[2], members[2].data.decode().encode("utf-16"))
        return members

    forge_consistently(archive, utf16)
    assert "metrics.json" in failure(archive, "contents")


def test_a_lone_surrogate_in_run_meta_gets_a_verdict(archive: Path) -> None:
    """JSON may escape a lone surrogate, which no UTF-8 manifest can hold: no crash."""

    def surrogate(members: list[Member]) -> list[Member]:
        text = (
            members[1].data.decode().replace('"model_name": "gpt-5.2"', '"model_name": "\\ud800"')
        )
        assert "\\ud800" in text
        members[1] = with_data(members[1], text.encode())
        return members

    forge_consistently(archive, surrogate)
    reading = read_bundle(archive)
    assert not reading.verification().ok
    assert reading.verification().failures()[0].name in ("contents", "claim")


def test_a_frame_of_empty_blocks_is_refused_quickly(archive: Path) -> None:
    """Walking blocks costs time per block: a frame of a million empty ones is refused early."""
    frames = bundle_frames(read_members(archive))
    empty_blocks = b"\x00\x00\x00" * 1_000_000
    last = b"\x01\x00\x00"  # an empty raw block, the frame's last
    checksum = (0xEF46DB3751D8E999 & 0xFFFFFFFF).to_bytes(4, "little")  # XXH64 of nothing
    forged = frames[1][:6] + empty_blocks + last + checksum
    write_frames(archive, [frames[0], forged, frames[2]])
    started = time.monotonic()
    assert "zstd frame 2 has 2 blocks for 0 bytes" in failure(archive, "zstd")
    assert time.monotonic() - started < 5


def test_usage_totals_past_int64_fail_a_check_and_the_other_bundles_are_still_read(
    tmp_path: Path,
) -> None:
    """Collect refuses such a run; a forged bundle with every digest right must fail its own
    check, not end the whole command (verify, upload, download and review read bundles so)."""
    report, _ = build(
        tmp_path,
        [RunSpec(rows=ROWS), RunSpec(task="maze", rows=ROWS)],
        CollectOptions(expected_rows={"expert-vqa": ROWS, "maze": ROWS}),
    )
    forged, good = (Path(bundle.archive) for bundle in report.bundles)

    def huge_usage(members: list[Member]) -> list[Member]:
        for number, member in enumerate(members):
            if member.info.name.startswith("predictions/"):
                record = json.loads(member.data)
                record["usage"] = {"input_tokens": 2**63 - 1}
                members[number] = with_data(member, json.dumps(record).encode())
        return members

    forge_consistently(forged, huge_usage)
    assert "adds up to more than 9223372036854775807" in failure(forged, "contents")
    result = run_cli("verify", forged, good, "--json")
    assert result.returncode == 1, result.stderr
    verdicts = {
        Path(bundle["archive"]): {check["status"] for check in bundle["checks"]}
        for bundle in json.loads(result.stdout)["bundles"]
    }
    assert verdicts == {forged: {"passed", "failed"}, good: {"passed"}}


def test_a_bundle_never_holds_more_predictions_than_collect_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count is checked as it grows (every PROGRESS_BATCH members) and once more at the
    end: a count just past the limit between two batches must not slip through. The limit is
    lowered here, the bundle made at the real one, to keep the bundle small."""
    rows = PROGRESS_BATCH + 3
    report, _ = build(
        tmp_path, [RunSpec(rows=rows)], CollectOptions(expected_rows={"expert-vqa": rows})
    )
    archive = Path(only_bundle(report).archive)
    assert read_bundle(archive).verification().ok
    monkeypatch.setattr(runs_module, "MAX_PREDICTIONS", rows - 1)
    assert f"{rows} predictions, more than the {rows - 1} of a bundle" in failure(
        archive, "members"
    )
