"""Never a silent downgrade: a bundle is not replaced by one that claims less.

collect asks `losses` just before a new bundle would replace an existing one: a weaker coverage
status (complete > partial > unknown), an expected row count or a submitter field dropped, fewer
rows present, or a --resolve-rows note lost. Without --replace the existing bundle is kept and
reported as kept, with one line naming what would be lost and how to keep it. The existing
claim is read from its sidecar, bounded; a sidecar that cannot be read claims nothing (the
bundle beside it is replaced as before, and verify says what was wrong with it).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from bundler.core.errors import InputError
from bundler.core.limits import MAX_SIDECAR_BYTES
from bundler.local.manifest import BundleClaim, Sidecar

COVERAGE_RANK = {"unknown": 0, "partial": 1, "complete": 2}
KEEP_HINT = "or set them in bundler.toml, or give --replace to replace it anyway"


def existing_claim(sidecar: Path) -> Sidecar | None:
    """The claim of the sidecar at `sidecar`, or None when there is none or it is unreadable."""
    from bundler.local.fileio import read_bounded

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
    for field in ("name", "contact", "affiliation"):
        before, after = getattr(old.submitter, field), getattr(new.submitter, field)
        if before is not None and after is None:
            lost.append(f"submitter {field} {before!r}")
    note_lost = old.inputs.row_count_note is not None and new.inputs.row_count_note is None
    if note_lost and new.coverage.expected_rows is None:
        lost.append("the --resolve-rows note")
    return lost


def first_run_flags(old: BundleClaim, new: BundleClaim) -> list[str]:
    """The flags that give the new bundle what the old one claimed and it would lose."""
    import shlex

    flags: list[str] = []
    if old.coverage.expected_rows is not None and new.coverage.expected_rows is None:
        flags.append(
            f"--expect {shlex.quote(f'{old.statics.task_name}={old.coverage.expected_rows}')}"
        )
    if old.inputs.row_count_note is not None and new.inputs.row_count_note is None:
        flags.append("--resolve-rows")
    for field in ("name", "contact", "affiliation"):
        before, after = getattr(old.submitter, field), getattr(new.submitter, field)
        if before is not None and after is None:
            flags.append(f"--submitter-{field} {shlex.quote(before)}")
    return flags


def downgrade(old: BundleClaim | None, new: BundleClaim) -> str | None:
    """The one line saying what replacing the bundle claiming `old` with `new` would lose and
    how to keep it, or None when the new claim loses nothing (or there is no old one)."""
    if old is None:
        return None
    lost = losses(old, new)
    if not lost:
        return None
    flags = first_run_flags(old, new)
    how = (
        f"give the first run's flags ({' '.join(flags)}) "
        if flags
        else "give the first run's flags "
    )
    return f"kept the existing bundle: the new one would lose {', '.join(lost)}; {how}{KEEP_HINT}"
