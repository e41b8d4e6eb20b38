"""Never a silent downgrade: a bundle is not replaced by one that claims less.

collect asks `downgrade` just before a new bundle would replace an existing one: a weaker
coverage status (complete > partial > unknown), an expected row count or a submitter field
dropped, fewer rows present, or the note of a row count lookup lost. Unless told to replace it
(--replace), the existing bundle is kept and reported as kept, with what would be lost and what
of the first run's inputs would keep it (a Downgrade: data, which the command line words as its
flags). The existing claim is read from its sidecar, bounded; a sidecar that cannot be read
claims nothing (the bundle beside it is replaced as before, and verify says what was wrong).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, ValidationError

from bundler.core.errors import InputError
from bundler.core.limits import MAX_SIDECAR_BYTES
from bundler.core.model import Model

if TYPE_CHECKING:
    from bundler.local.manifest import BundleClaim, Sidecar

COVERAGE_RANK = {"unknown": 0, "partial": 1, "complete": 2}
SUBMITTER_FIELDS = ("name", "contact", "affiliation")


class Downgrade(Model):
    """What the new bundle would lose against the one kept (`lost`, each a short phrase), and
    the first run's inputs that would keep it: the expected row count of `task`, the row count
    looked up on the Hub (`row_count_lookup`), the submitter's fields. Data rather than words,
    because the words that give these inputs are the command line's."""

    lost: list[str]
    differs: list[str] = Field(default_factory=list)
    """Every claim that differs between the kept bundle and the new one, `field old -> new`:
    what was lost is among them, and what else changed (a metric lives in the archive and is
    shown by `bundler diff`)."""
    task: str
    expected_rows: int | None = None
    row_count_lookup: bool = False
    submitter: dict[str, str] = Field(default_factory=dict)

    @property
    def sentence(self) -> str:
        """The one line saying what would be lost and how to keep it, in the library's words."""
        inputs = [
            *([f"expected rows {self.task}={self.expected_rows}"] if self.expected_rows else []),
            *(["the row count looked up on the Hub"] if self.row_count_lookup else []),
            *(f"submitter {field} {value!r}" for field, value in self.submitter.items()),
        ]
        given = f" ({', '.join(inputs)})" if inputs else ""
        return (
            f"kept the existing bundle: {self.losing}; "
            f"collect it with the first run's inputs{given}, or replace it anyway"
        )

    @property
    def losing(self) -> str:
        """What the new bundle would lose, and every claim that differs."""
        differs = f" (it differs in {', '.join(self.differs)})" if self.differs else ""
        return f"the new one would lose {', '.join(self.lost)}{differs}"


def existing_claim(sidecar: Path) -> Sidecar | None:
    """The claim of the sidecar at `sidecar`, or None when there is none or it is unreadable."""
    from bundler.local.fileio import read_bounded
    from bundler.local.manifest import Sidecar

    try:
        return Sidecar.model_validate_json(read_bounded(sidecar, MAX_SIDECAR_BYTES))
    except (InputError, ValidationError, OSError):
        return None


def losses(old: BundleClaim, new: BundleClaim) -> list[str]:
    """What `new` no longer claims that `old` did, each as a short phrase; [] when nothing."""
    lost: list[str] = []
    if COVERAGE_RANK[new.coverage.status] < COVERAGE_RANK[old.coverage.status]:
        lost.append(f"coverage {old.coverage.status} -> {new.coverage.status}")
    if old.coverage.expected_rows is not None and new.coverage.expected_rows is None:
        lost.append(f"expected row count {old.coverage.expected_rows}")
    if new.coverage.rows_present < old.coverage.rows_present:
        lost.append(f"rows present {old.coverage.rows_present} -> {new.coverage.rows_present}")
    for field in SUBMITTER_FIELDS:
        before, after = getattr(old.submitter, field), getattr(new.submitter, field)
        if before is not None and after is None:
            lost.append(f"submitter {field} {before!r}")
    note_lost = old.inputs.row_count_note is not None and new.inputs.row_count_note is None
    if note_lost and new.coverage.expected_rows is None:
        lost.append("the row count lookup's note")
    return lost


def downgrade(old: BundleClaim | None, new: BundleClaim) -> Downgrade | None:
    """What replacing the bundle claiming `old` with `new` would lose and the first run's
    inputs that keep it, or None when the new claim loses nothing (or there is no old one)."""
    if old is None:
        return None
    lost = losses(old, new)
    if not lost:
        return None
    dropped = old.coverage.expected_rows is not None and new.coverage.expected_rows is None
    from bundler.local.diff import claim_changes

    return Downgrade(
        lost=lost,
        differs=claim_changes(old, new),
        task=old.statics.task_name,
        expected_rows=old.coverage.expected_rows if dropped else None,
        row_count_lookup=old.inputs.row_count_note is not None
        and new.inputs.row_count_note is None,
        submitter={
            field: before
            for field in SUBMITTER_FIELDS
            if (before := getattr(old.submitter, field)) is not None
            and getattr(new.submitter, field) is None
        },
    )
