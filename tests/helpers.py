"""Shared helpers for the core tests: run the `bundler` command (in this process, or the
installed console script in a process of its own), build bundles, read archives back, and
forge tampered archives by hand with real tarfile and zstandard.

Nothing here is a mock: every helper works on real files, real tar streams and real zstd
frames, so a test that passes here passes for the same reason on a user's machine.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import hashlib
import io
import json
import locale
import logging
import os
import resource
import signal
import subprocess
import sys
import tarfile
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard
from factory import RunSpec, write_tree
from pydantic_core import from_json

from bundler.core.errors import STOP_SIGNALS
from bundler.local.collect import CollectedBundle, CollectOptions, CollectReport, collect
from bundler.local.layout import LOCK_NAME
from bundler.local.statcache import CACHE_NAMES

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
    a CI log gets (rich's default 80 columns), plus `env`. Python's streams are buffered, as
    a user's are: a developer's PYTHONUNBUFFERED would hide what a buffer does at exit."""
    dropped = (*SUBMITTER_VARIABLES, "COLUMNS", "LINES", "FORCE_COLOR", "TERM", "PYTHONUNBUFFERED")
    base = {key: value for key, value in os.environ.items() if key not in dropped}
    return base | (env or {})


IMPORT_TIME_VARIABLES = ("HF_",)
"""Prefixes of the variables huggingface_hub reads once, when it is imported (HF_HOME,
HF_ENDPOINT, HF_HUB_...; conftest sets them for the whole session): a command run in this
process cannot see other values of them. HF_TOKEN is read at each call."""


def run_cli(
    *args: object,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the `bundler` command in this process, as its console script would run it: the
    typer app parses `args` and runs the command, with what a process of its own would have
    (see `_as_a_command`), and the result reads as run_cli_process's does. Where a process
    matters (signals, forks, start-up, a closed pipe, a preexec_fn, variables read at import),
    use run_cli_process. The test's own timeout (pytest-timeout) bounds the call: `timeout`
    is kept for the signature's sake."""
    if preexec_fn is not None:
        raise TypeError("a preexec_fn acts on a process of its own: use run_cli_process")
    environment = cli_env(env)
    fixed = [
        name
        for name, value in (env or {}).items()
        if name.startswith(IMPORT_TIME_VARIABLES)
        and name != "HF_TOKEN"
        and os.environ.get(name) != value
    ]
    if fixed:
        raise ValueError(f"{fixed} are read when huggingface_hub is imported: use run_cli_process")
    argv = [str(arg) for arg in args]
    with _as_a_command(environment, cwd) as (stdout, stderr):
        returncode = _call_the_app(argv, stderr)
    return subprocess.CompletedProcess(["bundler", *argv], returncode, stdout(), stderr())


def _call_the_app(argv: list[str], stderr: Any) -> int:
    """What the console script's `main` ends with, as the interpreter turns it into an exit
    status: the app's own result (BundlerGroup.main), a SystemExit's code, or 1 and the
    traceback on stderr for an exception nothing caught."""
    try:
        result = _command().main(argv, "bundler", standalone_mode=False)
    except SystemExit as error:
        if error.code is None or isinstance(error.code, int):
            return error.code or 0
        print(error.code, file=stderr)
        return 1
    except Exception:
        traceback.print_exc(file=stderr)
        return 1
    return result if isinstance(result, int) else 0


@functools.cache
def _command() -> Any:
    """The click command typer builds from the app (a tenth of a second): built once here, as
    a process builds it once; it keeps nothing between two calls of its `main`."""
    import typer.main

    from bundler.cli.app import app

    return typer.main.get_command(app)


def subcommands(group: Any) -> dict[str, Any]:
    """A group's commands by name, each built as when the command line names it: the app
    registers them lazily (bundler.cli.commands), so a group's `commands` holds only those
    built so far."""
    import typer

    ctx = typer.Context(group, info_name=group.name)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}


DEFAULT_WARNING_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)
"""The warning filters a fresh interpreter starts with (no -W option, no PYTHONWARNINGS)."""


@contextlib.contextmanager
def _as_a_command(
    environment: dict[str, str], cwd: Path | None
) -> Iterator[tuple[Callable[[], str], Callable[[], str]]]:
    """For the length of one command: the environment `environment` (os.environ itself, as
    the library reads it at call time), the working folder `cwd`, stdin at /dev/null, stdout
    and stderr captured as a pipe would take them (the interpreter's encoding and error
    handlers; read back as subprocess.run(text=True) reads a pipe), the warnings a fresh
    interpreter shows (written on stderr), huggingface_hub's log lines on stderr and its
    verbosity, and the stop signals' handlers. All of it is this process's again afterwards.
    Yields functions that give each stream's text."""
    from huggingface_hub.utils import logging as hub_logging

    saved_environ, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_signals = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    hub_logger = hub_logging.get_logger("huggingface_hub")
    hub_level = hub_logger.level
    hub_handlers = [h for h in hub_logger.handlers if isinstance(h, logging.StreamHandler)]
    hub_streams = [handler.stream for handler in hub_handlers]
    out, err = io.BytesIO(), io.BytesIO()
    stdout = _pipe_writer(out, sys.__stdout__, "strict")
    stderr = _pipe_writer(err, sys.__stderr__, "backslashreplace")
    try:
        with open(os.devnull, encoding=stdout.encoding) as stdin:
            _set_environment(environment)
            if cwd is not None:
                os.chdir(cwd)
            sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
            for handler in hub_handlers:
                handler.setStream(stderr)
            with warnings.catch_warnings(record=True) as shown:
                warnings.resetwarnings()
                for action, category, module in reversed(DEFAULT_WARNING_FILTERS):
                    warnings.filterwarnings(action, category=category, module=module or "")
                yield (lambda: _pipe_text(out, stdout)), (lambda: _pipe_text(err, stderr))
            for warning in shown:
                stderr.write(
                    warnings.formatwarning(
                        warning.message,
                        warning.category,
                        warning.filename,
                        warning.lineno,
                        warning.line,
                    )
                )
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        _set_environment(saved_environ)
        for number, handler in saved_signals.items():
            signal.signal(number, handler)
        for handler, stream in zip(hub_handlers, hub_streams, strict=True):
            handler.setStream(stream)
        hub_logger.setLevel(hub_level)


def _set_environment(environment: dict[str, str]) -> None:
    """os.environ made `environment`, changing only the variables that differ (the test
    server's thread runs meanwhile: the fewer setenv calls, the better)."""
    for name in [name for name in os.environ if name not in environment]:
        del os.environ[name]
    for name, value in environment.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _pipe_writer(buffer: io.BytesIO, like: Any, errors: str) -> io.TextIOWrapper:
    """A text stream into `buffer` with the encoding and error handler the interpreter gives
    its own stream `like` (a pipe's: not a terminal, so rich and click draw for a log)."""
    return io.TextIOWrapper(
        buffer,
        encoding=getattr(like, "encoding", None) or "utf-8",
        errors=getattr(like, "errors", None) or errors,
        write_through=True,
    )


def _pipe_text(buffer: io.BytesIO, stream: io.TextIOWrapper) -> str:
    """What subprocess.run(text=True) reads from a pipe that received `buffer`'s bytes: the
    locale's encoding, strict, universal newlines."""
    stream.flush()
    data = buffer.getvalue().decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")


def run_cli_process(
    *args: object,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the installed `bundler` console script as a user would, in a process of its own."""
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


def run_python(
    script: str, *args: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `script` in a fresh interpreter of one thread, as the console script runs."""
    command = [sys.executable, "-c", script, *(str(arg) for arg in args)]
    return subprocess.run(command, capture_output=True, text=True, env=cli_env(env), check=False)


FORK_COUNTER = """
import os, sys
forks, loaded_at_forks = [], []
fork = os.fork

def counted_fork() -> int:
    loaded = [name for name in ("huggingface_hub", "pyarrow") if name in sys.modules]
    pid = fork()
    if pid:
        forks.append(pid)
        loaded_at_forks.append(loaded)
    return pid

os.fork = counted_fork
"""
"""A script's prelude that counts the children the process forks, in `forks`, and notes in
`loaded_at_forks` which of the Hub client and pyarrow it had loaded at each fork."""

_PROBE = (
    FORK_COUNTER
    + """
import atexit, gc, json, sys
from bundler.cli.app import main

state_path = sys.argv[1]

def report() -> None:
    state = {
        "loaded": sorted(
            name for name in sys.modules if name.startswith(("bundler.", "jinja2", "pandas"))
        ),
        "young_threshold": gc.get_threshold()[0],
        "frozen": gc.get_freeze_count(),
        "forks": len(forks),
        "loaded_at_forks": loaded_at_forks,
    }
    with open(state_path, "w") as out:
        json.dump(state, out)

atexit.register(report)
sys.argv = ["bundler", *sys.argv[2:]]
main()
"""
)


def probe_console_script(
    tmp_path: Path, *args: object, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """Run the console script's `main` with `args`; its exit code and, as the process ends, the
    bundler, jinja2 and pandas modules it loaded, the state of the garbage collector, how often
    it forked and what it had loaded at each fork (FORK_COUNTER)."""
    state = tmp_path / "probe.json"
    result = run_python(_PROBE, state, *args, env=env)
    return result.returncode, json.loads(state.read_text())


PR_CAPBSET_DROP = 24
ROOT_OVERRIDES = (1, 2)
"""CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: what lets root write into a read-only folder."""


def _drop_root_overrides() -> None:
    """A preexec_fn that drops ROOT_OVERRIDES from the command's bounding set (as `setpriv
    --bounding-set` does), so the exec leaves root without them; for anyone else a no-op."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in ROOT_OVERRIDES:
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_cli_as_any_user(
    *args: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """run_cli_process where file permissions bind the command even when the tests run as
    root, so a read-only folder really cannot be written; skips where root cannot shed that
    override."""
    try:
        return run_cli_process(*args, env=env, preexec_fn=_drop_root_overrides)
    except subprocess.SubprocessError as error:
        pytest.skip(f"cannot run the command without root's permission override: {error}")


@contextlib.contextmanager
def read_only_folder(path: Path) -> Iterator[Path]:
    """`path` made as a folder no one may write to (with run_cli_as_any_user, root neither),
    made writable again afterwards so the test's temporary folder can be removed."""
    path.mkdir()
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


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


@contextlib.contextmanager
def nested_folders(parent: Path, depth: int) -> Iterator[Path]:
    """`depth` folders `d` nested in `parent`, yielding the deepest, removed bottom-up on the
    way out: shutil.rmtree recurses, so a tree this deep left in pytest's temporary folder
    would break its clean-up for every later run on the machine."""
    parent.mkdir(parents=True, exist_ok=True)
    bottom, made = parent, 0
    try:
        for _ in range(depth):  # one at a time: mkdir(parents=True) recurses too
            bottom = bottom / "d"
            bottom.mkdir()
            made += 1
        yield bottom
    finally:
        folder = parent.joinpath(*["d"] * made)
        for _ in range(made):
            for entry in list(folder.iterdir()):
                entry.unlink()
            folder.rmdir()
            folder = folder.parent


def strict_json(text: str | bytes) -> Any:
    """`text` parsed as RFC 8259 JSON, as strict parsers (serde_json, pydantic's) read it:
    NaN and Infinity, which Python writes, and lone surrogate escapes are refused."""
    return from_json(text, allow_inf_nan=False)


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
    """Every file below `directory` except a bundles folder's lock file and stat caches,
    which belong to the folder (they stay for the next run), not to any one run's output."""
    return sorted(
        path
        for path in directory.rglob("*")
        if not path.is_dir() and path.name != LOCK_NAME and path.name not in CACHE_NAMES
    )


# Reading archives back -----------------------------------------------------------------------


@dataclass
class Member:
    info: tarfile.TarInfo
    data: bytes
    header: bytes | None = None
    """Header bytes to write instead of the PAX-format ones `info` gives (a GNU header)."""

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
#
# The forger knows the format: members re-hashed into the manifest, the manifest in collect's
# exact layout, the three zstd frames (each with its checksum) exactly as collect's compressor
# writes them, and a sidecar that matches the forged bytes. Only verify's deeper checks can
# then tell. Headers are tarfile's own bytes, so a canonical TarInfo gives a canonical header
# and any other TarInfo (a link, a PAX or GNU extension, another mode) the header tar writes.

FRAME_LEVEL = 3
"""The zstd level collect uses by default, which the forged manifests record."""


def regular(name: str, data: bytes, mtime: int) -> Member:
    """A member with the header collect writes (mode 0644, owner 0, no names)."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    info.mode = 0o644
    return Member(info, data)


def with_data(member: Member, data: bytes) -> Member:
    """The same header fields, other content."""
    info = copy.copy(member.info)
    info.size = len(data)
    return Member(info, data)


def member_bytes(member: Member) -> bytes:
    """One member as tarfile writes it in PAX format: header(s), content, zero padding."""
    info = member.info
    if info.isreg():
        info.size = len(member.data)
    header = member.header or info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    data = member.data if info.isreg() else b""
    return header + data + bytes(-len(data) % tarfile.BLOCKSIZE)


def tar_bytes(members: Iterable[Member]) -> bytes:
    """A whole tar stream, as tarfile writes it."""
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


def frame(data: bytes, *, checksum: bool = True) -> bytes:
    """One zstd frame as collect's streaming compressor writes it: no content size, the
    level's window, and (unless told otherwise) a content checksum."""
    buffer = io.BytesIO()
    compressor = zstandard.ZstdCompressor(level=FRAME_LEVEL, write_checksum=checksum, threads=1)
    with compressor.stream_writer(buffer, closefd=False) as writer:
        writer.write(data)
    return buffer.getvalue()


def compress(data: bytes, *, checksum: bool = True) -> bytes:
    """One frame of everything, as a plain zstd tool writes it (not collect's layout)."""
    return zstandard.ZstdCompressor(level=FRAME_LEVEL, write_checksum=checksum).compress(data)


def bundle_frames(
    members: list[Member], checksums: tuple[bool, bool, bool] = (True, True, True)
) -> list[bytes]:
    """collect's three frames: the first member, the others, then the tar's end (two zero
    blocks and zeros to a whole 10 KiB record)."""
    head = member_bytes(members[0])
    body = b"".join(member_bytes(member) for member in members[1:])
    end = bytes(2 * 512 + -(len(head) + len(body) + 2 * 512) % 10240)
    return [
        frame(part, checksum=check)
        for part, check in zip((head, body, end), checksums, strict=True)
    ]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sidecar_path(archive: Path) -> Path:
    return archive.with_name(archive.name.removesuffix(".tar.zst") + ".json")


def json_bytes(value: dict[str, Any]) -> bytes:
    """JSON laid out as pydantic's model_dump_json(indent=2) lays it out, plus a newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def write_sidecar(archive: Path, sidecar: dict[str, Any], *, name: str | None = None) -> None:
    """Write `sidecar` with the archive info of the archive's current bytes."""
    data = archive.read_bytes()
    info = {"name": name or archive.name, "size": len(data), "sha256": sha256(data)}
    sidecar_path(archive).write_bytes(json_bytes({**sidecar, "archive": info}))


def rewrite_sidecar(
    archive: Path,
    edit: Callable[[dict[str, Any]], None] | None = None,
    *,
    name: str | None = None,
    **changes: Any,
) -> None:
    """Make the sidecar agree with the archive's current bytes, after `changes` to its fields
    and `edit` of the parsed JSON (computed fields included), under the archive's own name
    unless `name` says otherwise."""
    sidecar = json.loads(sidecar_path(archive).read_bytes()) | changes
    if edit is not None:
        edit(sidecar)
    write_sidecar(archive, sidecar, name=name)


def sidecar_from_manifest(archive: Path, manifest: dict[str, Any]) -> None:
    """The sidecar collect would write for `manifest`: its claim, less the file list."""
    claim = {key: value for key, value in manifest.items() if key != "files"}
    files = manifest.get("files")
    count = len(files) if isinstance(files, list) else 0
    write_sidecar(archive, {**claim, "archive": None, "files_count": count})


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """A manifest in collect's exact layout: the claim as pydantic writes it, then the file
    list one entry per line (any JSON a forger puts there)."""
    claim = {key: value for key, value in manifest.items() if key != "files"}
    head = json.dumps(claim, indent=2, ensure_ascii=False).removesuffix("\n}") + ","
    if not claim:
        head = "{"
    files = manifest.get("files", [])
    entries = files if isinstance(files, list) else [files]
    listed = ",".join("\n    " + json.dumps(entry) for entry in entries)
    return f'{head}\n  "files": [{listed}\n  ]\n}}\n'.encode()


def manifest_member(manifest: dict[str, Any], mtime: int) -> Member:
    return regular("manifest.json", manifest_bytes(manifest), mtime)


def refresh_manifest(members: list[Member]) -> list[Member]:
    """Recompute the manifest's file list (size, sha256) from the members that follow it, as a
    careful forger would, so only the deeper checks can catch the forgery."""
    manifest = json.loads(members[0].data)
    by_name = {member.name: member for member in members[1:]}
    for entry in manifest["files"]:
        if entry["path"] in by_name:
            data = by_name[entry["path"]].data
            entry["size"], entry["sha256"] = len(data), sha256(data)
    return [manifest_member(manifest, members[0].info.mtime), *members[1:]]


Transform = Callable[[list[Member]], list[Member]]


def edit_manifest(change: Callable[[dict[str, Any]], None]) -> Transform:
    """A transform that applies `change` to the parsed manifest."""

    def transform(members: list[Member]) -> list[Member]:
        manifest = json.loads(members[0].data)
        change(manifest)
        return [manifest_member(manifest, members[0].info.mtime), *members[1:]]

    return transform


def forge(
    archive: Path,
    transform: Transform,
    *,
    checksums: tuple[bool, bool, bool] = (True, True, True),
    fix_sidecar: bool = True,
    sidecar_from_claim: bool = False,
) -> None:
    """Rewrite `archive` with `transform` applied to its members, in collect's frame layout,
    and (unless told otherwise) a sidecar whose digest matches the forged bytes, so the checks
    behind the digest are the ones tested. `sidecar_from_claim` also copies the manifest's
    claim into the sidecar, as collect would write it."""
    members = transform(read_members(archive))
    archive.write_bytes(b"".join(bundle_frames(members, checksums)))
    if sidecar_from_claim:
        sidecar_from_manifest(archive, json.loads(members[0].data))
    elif fix_sidecar:
        rewrite_sidecar(archive)


def forge_consistently(archive: Path, transform: Transform) -> None:
    """A forgery with every digest right: the manifest's file list, the frames' checksums, and
    a sidecar that is exactly the manifest's claim plus the archive's own name, size, sha256."""
    forge(archive, lambda members: refresh_manifest(transform(members)), sidecar_from_claim=True)


def table_parts(hub: Any, repo_id: str, revision: str = "main") -> dict[str, bytes]:
    """The all-tasks table's parts a branch holds, by path."""
    from bundler.hub.repo.paths import part_number

    paths = [p for p in hub.list_files(repo_id, revision=revision) if part_number(p) is not None]
    return {path: hub.file_bytes(repo_id, path, revision=revision) or b"" for path in paths}


def all_tasks_table(hub: Any, repo_id: str, revision: str = "main") -> Any:
    """The all-tasks table a branch holds, its parts read as one Arrow table (as the viewer
    and DuckDB read the folder)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = [
        pq.read_table(pa.BufferReader(data))
        for data in table_parts(hub, repo_id, revision).values()
    ]
    return pa.concat_tables(parts) if parts else None


def published_leaderboard(hub: Any, repo_id: str, revision: str = "main") -> Any:
    """The all-tasks table a branch holds, as the bundler reads it (AllTasksTable)."""
    from bundler.hub.leaderboard.tables import AllTasksTable

    return AllTasksTable.read(table_parts(hub, repo_id, revision))
