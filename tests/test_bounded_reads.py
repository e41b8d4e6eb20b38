"""Every file a person names for the bundler to read has a size bound (bundler.core.limits),
checked while it is read (one byte past the bound at most): /dev/zero, an endless FIFO or a
huge file is one line naming the file and the bound, exit 2, never a MemoryError (issue 36).
A FIFO is read as it comes (`--key <(...)`), and one that no writer opens is refused after a
bounded wait."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from factory import RunSpec, write_tree
from helpers import build, one_line_error, run_cli, strict_json
from test_sign import make_key

from bundler.core.limits import (
    FIFO_WRITER_WAIT_SECONDS,
    MAX_CONFIG_BYTES,
    MAX_PRIVATE_KEY_BYTES,
    MAX_PUBLIC_KEY_BYTES,
)

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")


@pytest.fixture
def bundles(tmp_path: Path) -> Path:
    _, folder = build(tmp_path, [RunSpec(rows=2)])
    return folder


@pytest.fixture
def endless_fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO a thread writes zeros into until the reader closes it."""
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as handle:
            try:
                while True:
                    handle.write(bytes(1 << 16))
            except BrokenPipeError:
                pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield fifo
    writer.join(timeout=10)
    assert not writer.is_alive()


def _refused(result: object, path: Path | str, bound: int) -> None:
    assert result.returncode == 2, result.stderr  # type: ignore[attr-defined]
    line = one_line_error(result.stderr)  # type: ignore[attr-defined]
    assert line.startswith(f"error: {path}: larger than {bound:,} bytes"), line


def test_sign_refuses_an_endless_key(bundles: Path, endless_fifo: Path) -> None:
    _refused(run_cli("sign", bundles, "--key", "/dev/zero"), "/dev/zero", MAX_PRIVATE_KEY_BYTES)
    _refused(run_cli("sign", bundles, "--key", endless_fifo), endless_fifo, MAX_PRIVATE_KEY_BYTES)
    result = run_cli("sign", bundles, "--key", "/dev/zero", "--json")
    assert result.returncode == 2
    assert strict_json(result.stdout)["error"].startswith("/dev/zero: larger than")


def test_a_key_too_large_is_refused_and_a_key_at_the_bound_is_read(
    bundles: Path, tmp_path: Path
) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"#" * (MAX_PRIVATE_KEY_BYTES + 1))
    _refused(run_cli("sign", bundles, "--key", big), big, MAX_PRIVATE_KEY_BYTES)
    big.write_bytes(b"#" * MAX_PRIVATE_KEY_BYTES)
    result = run_cli("sign", bundles, "--key", big)
    assert "larger than" not in result.stderr  # read, then found to be no key


def test_a_key_through_a_fifo_signs(bundles: Path, tmp_path: Path) -> None:
    """`--key <(pass show signing-key)`: the key arrives through a pipe, and signs."""
    key = make_key(tmp_path, "ada")
    fifo = tmp_path / "key-fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as handle:
            handle.write(key.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    result = run_cli("sign", bundles, "--key", fifo, "--json")
    writer.join(timeout=10)
    assert result.returncode == 0, result.stderr
    assert [bundle["outcome"] for bundle in strict_json(result.stdout)["bundles"]] == ["signed"]


def test_collect_refuses_an_endless_sign_key(tmp_path: Path) -> None:
    write_tree(tmp_path / "output", [RunSpec(rows=1)])
    for key in ("/dev/zero", tmp_path / "output"):
        result = run_cli(
            "collect", tmp_path / "output", "-o", tmp_path / "b", "--sign-key", key, "--expect",
            "expert-vqa=1",
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        one_line_error(result.stderr)
    _refused(
        run_cli("collect", tmp_path / "output", "-o", tmp_path / "b", "--sign-key", "/dev/zero"),
        "/dev/zero",
        MAX_PRIVATE_KEY_BYTES,
    )


def test_signers_add_refuses_an_endless_key_before_asking_the_hub(
    tmp_path: Path, endless_fifo: Path
) -> None:
    """No Hub is running at this repository's name: the key is refused first."""
    for key in (Path("/dev/zero"), endless_fifo):
        _refused(
            run_cli("signers", "add", "eve", "--key", key, "--repo", "owner/board"),
            key,
            MAX_PUBLIC_KEY_BYTES,
        )


def test_a_config_file_is_bounded_and_a_fifo_without_writer_is_not_waited_on_for_ever(
    tmp_path: Path,
) -> None:
    (tmp_path / "output").mkdir()
    _refused(
        run_cli("--config", "/dev/zero", "collect", tmp_path / "output"),
        "/dev/zero",
        MAX_CONFIG_BYTES,
    )
    fifo = tmp_path / "bundler.toml"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = run_cli("--config", fifo, "collect", tmp_path / "output", "-o", tmp_path / "b")
    assert time.monotonic() - started < FIFO_WRITER_WAIT_SECONDS + 30
    assert result.returncode == 2, result.stderr
    assert one_line_error(result.stderr) == (
        f"error: {fifo}: no writer opened this FIFO within {FIFO_WRITER_WAIT_SECONDS} s;"
        " not a config file (see `bundler --help`)"
    ), result.stderr
    assert not (tmp_path / "b").exists()


def test_export_refuses_a_player_config_that_is_no_file(bundles: Path, tmp_path: Path) -> None:
    result = run_cli(
        "export-gptnt", bundles, "-o", tmp_path / "out", "--player-config", "/dev/zero"
    )
    assert result.returncode == 2, result.stderr
    assert one_line_error(result.stderr) == "error: /dev/zero: not a regular file"
