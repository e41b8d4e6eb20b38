"""The config file: what a job repeats every night, in `bundler.toml` (in the working folder)
or the file `--config FILE` names.

TOML, read with the standard library, one table per command (`[collect]`, `[upload]`,
`[sync]`, `[download]`), each a pydantic model that refuses unknown keys and wrong types with
one line naming the key (exit 2). Its values become the defaults of the command's options
(click's `default_map`), so an option given on the command line (or its environment variable)
always wins, and the commands themselves stay as they are. `collect` also takes the keys it
shares with `[sync]` that `[collect]` does not set.

    [collect]
    output = "bundles"
    expect = { expert-vqa = 1200 }
    resolve_rows = true
    submitter = { name = "Ada Lovelace", contact = "@ada", affiliation = "Analytical Engines" }
    level = 9

    [sync]
    repo = "my-org/gptnt-statics"
    resolve_rows = true
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bundler.core.errors import UsageError
from bundler.core.limits import MAX_CONFIG_BYTES, MAX_LEVEL


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SubmitterTable(_Table):
    name: str | None = None
    contact: str | None = None
    affiliation: str | None = None


class _CollectKeys(_Table):
    output: str | None = None
    task: list[str] | None = None
    model: list[str] | None = None
    expect: dict[str, int] | None = None
    resolve_rows: bool | None = None
    allow_partial: bool | None = None
    submitter: SubmitterTable | None = None
    level: int | None = Field(default=None, ge=1, le=MAX_LEVEL)
    wait: float | None = Field(default=None, ge=0)


class _UploadKeys(_Table):
    repo: str | None = None
    revision: str | None = None
    create_pr: bool | None = None
    allow_partial: bool | None = None
    message: str | None = None
    wait: float | None = Field(default=None, ge=0)
    max_wait: float | None = Field(default=None, ge=0)


class CollectConfig(_CollectKeys):
    """`[collect]`."""


class UploadConfig(_UploadKeys):
    """`[upload]`."""

    output: str | None = Field(default=None, description="the bundles folder (BUNDLES_DIR)")


class SyncConfig(_CollectKeys, _UploadKeys):
    """`[sync]`: collect's keys and upload's."""


class DownloadConfig(_Table):
    """`[download]`."""

    repo: str | None = None
    output: str | None = None
    revision: str | None = None


class BundlerConfig(_Table):
    collect: CollectConfig = Field(default_factory=CollectConfig)
    upload: UploadConfig = Field(default_factory=UploadConfig)
    sync: SyncConfig = Field(default_factory=SyncConfig)
    download: DownloadConfig = Field(default_factory=DownloadConfig)


def _parameter(key: str) -> str:
    return "bundles_dir" if key == "output" else key


def default_map(config: BundlerConfig) -> dict[str, dict[str, Any]]:
    """The config as click's default_map: per command, each option's parameter name and the
    value it takes when the command line does not give it."""
    result: dict[str, dict[str, Any]] = {}
    for command in BundlerConfig.model_fields:
        defaults: dict[str, Any] = {}
        for key, value in _table_values(config, command).items():
            if key == "expect":
                defaults["expect"] = [f"{task}={rows}" for task, rows in value.items()]
            elif key == "submitter":
                for field, text in value.items():
                    if text is not None:
                        defaults[f"submitter_{field}"] = text
            else:
                defaults[_parameter(key)] = value
        if defaults:
            result[command] = defaults
    return result


def _table_values(config: BundlerConfig, command: str) -> dict[str, Any]:
    """The keys a command takes from the config: its table's, and for collect also those it
    shares with `[sync]` that `[collect]` leaves unset, so that `bundler collect` in a nightly
    job's folder bundles as the nightly `sync` does."""
    values: dict[str, Any] = getattr(config, command).model_dump(exclude_none=True)
    if command == "collect":
        shared = config.sync.model_dump(include=set(_CollectKeys.model_fields), exclude_none=True)
        values = shared | values
    return values


def load_config(path: Path) -> BundlerConfig:
    """The config file at `path`; UsageError (exit 2) with one line naming the key when it is
    not TOML, has an unknown table or key, or a value of the wrong type."""
    import tomllib

    from bundler.local.fileio import read_named_file  # only when there is a config to read

    data = read_named_file(path, MAX_CONFIG_BYTES, "config file")
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: not a TOML file ({error})") from None
    try:
        return BundlerConfig.model_validate(parsed)
    except ValidationError as error:
        first = error.errors()[0]
        loc = [str(part) for part in first["loc"]]
        table, key = (loc[0], ".".join(loc[1:])) if loc else ("", "")
        where = f"[{table}] {key}" if key else f"[{table}]"
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        if not key and first["type"] == "extra_forbidden":
            message = f"unknown table (known: {', '.join(BundlerConfig.model_fields)})"
        raise UsageError(
            f"{path}: {where}: {message}", hint="see the config example in `bundler --help`"
        ) from None
