"""Shared helpers for the core tests: run the installed console script, build bundles, read
archives back, and forge tampered archives by hand with real tarfile and zstandard.

Nothing here is a mock: every helper works on real files, real tar streams and real zstd
frames, so a test that passes here passes for the same reason on a user's machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard
from factory import RunSpec, write_tree

from bundler.collect import CollectedBundle, CollectOptions, CollectReport, collect, sidecar_bytes
from bundler.layout import LOCK_NAME
from bundler.manifest import ArchiveInfo, Manifest, Sidecar

BUNDLER = Path(sys.executable).parent / "bundler"
"""The console script installed in the same environment as the interpreter running the tests."""

SUBMITTER_VARIABLES = (
    "BUNDLER_SUBMITTER_NAME",
    "BUNDLER_SUBMITTER_CONTACT",
    "BUNDLER_SUBMITTER_AFFILIATION",
)


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The current environment without submitter variables (so a developer's own settings do
    not leak into assertions) and without terminal-size or colour settings, so output is what
    a CI log gets (rich's default 80 columns), plus `env`."""
    dropped = (*SUBMITTER_VARIABLES, "COLUMNS", "LINES", "FORCE_COLOR", "TERM")
    base = {key: value for key, value in os.environ.items() if key not in dropped}
    return base | (env or {})


def run_cli(
    *args: object,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the installed `bundler` console script as a user would."""
    return subprocess.run(
        [str(BUNDLER), *(str(arg) for arg in args)],
        capture_output=True,
        text=True,
        env=cli_env(env),
        cwd=cwd,
        timeout=timeout,
        preexec_fn=preexec_fn,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@dataclass
class Measured:
    returncode: int
    stdout: str
    stderr: str
    max_rss_kib: int
    """Peak resident set size of that one child process (Linux reports KiB)."""


_PEAK_RSS_LAUNCHER = """
import os, subprocess, sys
out, err, *argv = sys.argv[1:]
with open(out, "wb") as stdout, open(err, "wb") as stderr:
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = 0
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def run_cli_measured(*args: object, workdir: Path) -> Measured:
    """Run the console script and read its own peak RSS (os.wait4), through a small launcher.

    Linux carries a child's peak RSS over from the memory it was forked (or vforked) from,
    across exec: started straight from pytest (hundreds of MiB once pyarrow is loaded) the
    bundler would be charged with pytest's size. The launcher is a fresh, small interpreter,
    so what is measured is the bundler.
    """
    out, err = workdir / "stdout.txt", workdir / "stderr.txt"
    argv = [str(BUNDLER), *(str(arg) for arg in args)]
    launched = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_LAUNCHER, str(out), str(err), *argv],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=True,
    )
    returncode, max_rss_kib = (int(value) for value in launched.stdout.split())
    return Measured(
        returncode=returncode,
        stdout=out.read_text(),
        stderr=err.read_text(),
        max_rss_kib=max_rss_kib,
    )


def limit_file_size(limit: int) -> Callable[[], None]:
    """A preexec_fn that makes writes beyond `limit` bytes fail with EFBIG, as a full disk
    would fail them, instead of killing the process with SIGXFSZ."""

    def apply() -> None:
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def one_line_error(stderr: str) -> str:
    """The single `error:` line of a failed command; asserts there is exactly one."""
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


# Building bundles ----------------------------------------------------------------------------


def build(
    tmp: Path, specs: list[RunSpec], options: CollectOptions | None = None, *, name: str = "b"
) -> tuple[CollectReport, Path]:
    """Write a tree of `specs` under tmp/out (once) and collect it into tmp/<name>."""
    root = tmp / "out"
    if not root.exists():
        write_tree(root, specs)
    bundles = tmp / name
    return collect(root, bundles, options), bundles


def only_bundle(report: CollectReport) -> CollectedBundle:
    assert not report.refused, report.refused
    assert len(report.bundles) == 1, report.bundles
    return report.bundles[0]


def partial_files(directory: Path) -> list[Path]:
    return [path for path in directory.rglob("*") if path.name.endswith(".partial")]


def all_files(directory: Path) -> list[Path]:
    """Every file below `directory` except a bundles folder's lock file, which belongs to the
    folder (it stays for the next run), not to any one run's output."""
    return sorted(
        path for path in directory.rglob("*") if not path.is_dir() and path.name != LOCK_NAME
    )


# Reading archives back -----------------------------------------------------------------------


@dataclass
class Member:
    info: tarfile.TarInfo
    data: bytes

    @property
    def name(self) -> str:
        return self.info.name


def decompress(path: Path) -> bytes:
    with path.open("rb") as handle:
        reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
        return reader.read()


def read_members(path: Path) -> list[Member]:
    """Every member of a (small, trusted) archive, in stored order, with its bytes."""
    members: list[Member] = []
    with tarfile.open(fileobj=io.BytesIO(decompress(path)), mode="r:") as tar:
        for info in tar:
            handle = tar.extractfile(info) if info.isreg() else None
            members.append(Member(info, handle.read() if handle else b""))
    return members


def read_manifest(path: Path) -> dict[str, Any]:
    first = read_members(path)[0]
    assert first.name == "manifest.json"
    return json.loads(first.data)


# Forging archives ----------------------------------------------------------------------------


def regular(name: str, data: bytes, mtime: int = 0) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    info.mode = 0o644
    return Member(info, data)


def tar_bytes(members: Iterable[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            info = member.info
            if info.isreg():
                info.size = len(member.data)
                tar.addfile(info, io.BytesIO(member.data))
            else:
                tar.addfile(info)
    return buffer.getvalue()


def compress(data: bytes, *, checksum: bool = True) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=checksum).compress(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sidecar_path(archive: Path) -> Path:
    return archive.with_name(archive.name.removesuffix(".tar.zst") + ".json")


def rewrite_sidecar(archive: Path, **changes: Any) -> None:
    """Make the sidecar agree with the archive's current bytes (and apply `changes`)."""
    path = sidecar_path(archive)
    data = archive.read_bytes()
    sidecar = Sidecar.model_validate_json(path.read_bytes())
    info = ArchiveInfo(name=archive.name, size=len(data), sha256=sha256(data))
    fields = sidecar.model_dump() | {"archive": info.model_dump()} | changes
    path.write_bytes(sidecar_bytes(Sidecar.model_validate(fields)))


def manifest_member(manifest: dict[str, Any]) -> Member:
    return regular("manifest.json", json.dumps(manifest, indent=2).encode())


def refresh_manifest(members: list[Member]) -> list[Member]:
    """Recompute the manifest's file list (size, sha256) from the members that follow it, as a
    careful forger would, so only the deeper checks can catch the forgery."""
    manifest = json.loads(members[0].data)
    by_name = {member.name: member for member in members[1:]}
    for entry in manifest["files"]:
        if entry["path"] in by_name:
            data = by_name[entry["path"]].data
            entry["size"], entry["sha256"] = len(data), sha256(data)
    return [manifest_member(manifest), *members[1:]]


def forge(
    archive: Path,
    transform: Callable[[list[Member]], list[Member]],
    *,
    checksum: bool = True,
    fix_sidecar: bool = True,
    sidecar_from_manifest: bool = False,
) -> None:
    """Rewrite `archive` with `transform` applied to its members, recompressed, and (unless
    told otherwise) a sidecar whose digest matches the forged bytes, so the checks behind the
    digest are the ones tested. `sidecar_from_manifest` also copies the manifest's claims."""
    members = transform(read_members(archive))
    archive.write_bytes(compress(tar_bytes(members), checksum=checksum))
    if sidecar_from_manifest:
        manifest = Manifest.model_validate_json(members[0].data)
        rewrite_sidecar(archive, **manifest.claim().model_dump(), files_count=len(manifest.files))
    elif fix_sidecar:
        rewrite_sidecar(archive)
