"""The values of a collect: what it is told (`CollectOptions`, `RowCountLookup`) and what it
reports (`CollectReport`, one `CollectedBundle` per bundle, one `RefusedInput` per refusal).

Every stage of the collect pipeline (bundler.local.selection, bundler.local.bundling) speaks
these, and bundler.local.collect, which runs the stages, returns the report.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import ConfigDict, Field

from bundler.core import exitcodes
from bundler.core.error_shape import ErrorShape
from bundler.core.limits import DEFAULT_LEVEL, MAX_LEVEL
from bundler.core.model import Model, RemedyField
from bundler.local.discover import Skipped
from bundler.local.downgrade import Downgrade
from bundler.local.sign import SignReport
from bundler.local.submitter import Submitter

if TYPE_CHECKING:
    from bundler.local.schema import StaticsIdentity


class RowCountLookup(Protocol):
    """Where `collect` learns a dataset split's row count when `--expect` does not give it
    (`bundler.hub.tasks.split_size.RowCountResolver` asks the Hub). A parameter rather than an
    import, so the local format never reaches the network itself."""

    def rows(self, identity: StaticsIdentity) -> tuple[int | None, str | None]:
        """The row count, or None with the reason as a warning."""


class CollectOptions(Model):
    model_config = ConfigDict(frozen=True)

    tasks: list[str] = Field(default_factory=list, description="keep only these task names")
    models: list[str] = Field(
        default_factory=list, description="keep only runs whose player_name or model_name is one"
    )
    submitter: Submitter = Field(default_factory=Submitter)
    expected_rows: dict[str, int] = Field(default_factory=dict)
    allow_partial: bool = False
    level: int = Field(default=DEFAULT_LEVEL, ge=1, le=MAX_LEVEL)
    threads: int | None = Field(default=None, ge=1)
    lock_wait: float = Field(
        default=0, ge=0, description="seconds to wait for another run to release the folder"
    )
    full: bool = Field(
        default=False,
        description="read every run again, trusting no cache (bundler.local.collectcache)",
    )
    replace: bool = Field(
        default=False, description="replace a bundle even by one that claims less (downgrade)"
    )

    @cached_property
    def submitter_json(self) -> dict[str, object]:
        """The submitter as the stat cache records it: dumped once, not once per run."""
        return self.submitter.model_dump(mode="json")

    def cache_inputs(
        self, expected_rows: int | None, row_count_note: str | None
    ) -> dict[str, object]:
        """What shaped a run's bundle besides its files, as the stat cache records it (the
        bundler version is the cache's own): a cached run is skipped only while they match."""
        return {
            "submitter": self.submitter_json,
            "expected_rows": expected_rows,
            "row_count_note": row_count_note,
            "allow_partial": self.allow_partial,
            "level": self.level,
        }


CollectOutcome = Literal["written", "unchanged", "replaced", "kept"]


class CollectedBundle(Model):
    bundle_id: str
    run_directory: str
    archive: str
    sidecar: str
    outcome: CollectOutcome
    sha256: str
    size: int
    coverage: str
    predictions: int
    warnings: list[str]
    kept: str | None = Field(
        default=None, description="outcome kept: what the new bundle would have lost, and how"
    )
    downgrade: Downgrade | None = Field(default=None, exclude_if=lambda value: value is None)


class RefusedInput(Model):
    path: str
    error: str
    remedy: RemedyField = None


class CollectReport(Model, ErrorShape):
    output_root: str
    bundles_dir: str
    bundles: list[CollectedBundle] = Field(default_factory=list)
    refused: list[RefusedInput] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    removed_temporaries: list[str] = Field(
        default_factory=list, description="leftover temporary files of a killed run, removed"
    )
    error: str | None = Field(
        default=None,
        description="why the runs that were not refused were not bundled: another run held the "
        "bundles folder (they are under `skipped`; run again later)",
    )
    hint: str | None = None
    error_kind: str | None = None
    warnings: list[str] = Field(
        default_factory=list, description="e.g. that the output root holds no run: nothing to do"
    )
    signing: SignReport | None = Field(
        default=None, description="what signing the bundles did, when a key was given"
    )

    @property
    def exit_code(self) -> int:
        """1 when an input was refused (or a bundle could not be signed), else 75 when the
        bundles folder was in use, else 0: a refusal asks more of a person than a retry does
        (bundler.core.exitcodes)."""
        kept = any(bundle.outcome == "kept" for bundle in self.bundles)
        return exitcodes.combine(
            exitcodes.LOOK if self.refused or kept else exitcodes.OK,
            exitcodes.TEMPORARY if self.error is not None else exitcodes.OK,
            self.signing.exit_code if self.signing is not None else exitcodes.OK,
        )
