"""Stage 5: publish verified bundles to a Hugging Face dataset repository.

`upload` takes the bundles folder's lock, verifies every local bundle once (`gather_local`: a
bundle that fails is refused, and a partial one is held back unless --allow-partial: tonight's
run may complete it), then plans (`bundler.hub.publish.plan`) and makes the commits
(`bundler.hub.publish.publisher`).

Verifying 50 bundles and loading the Hub client take about as long (tests/benchmark_upload.py,
docs/performance.md). Where the console script allows it (bundler.core.forked), the bundles are
verified in a forked child while this process loads the Hub client. A library caller gets them
verified in line, as does the console script on a platform without fork or when the child
fails; the result is the same. This process imports neither verifying nor signatures for it
(nor diffing, which only a bundle the Hub holds with other content needs): the child reads the
bundles, or the verify cache vouches for them, and those imports were the largest part of this
module's own (see docs/performance.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from bundler.core.errors import HubError, PullRequestRevision
from bundler.core.forked import Watch, ahead_in_child
from bundler.core.progress import NoProgress, ProgressSink, Unit
from bundler.hub.publish.outcome import say_what_happened
from bundler.hub.publish.plan import BundlePlan, LocalBundle, UploadOptions, UploadReport
from bundler.local.layout import find_archive_paths
from bundler.local.lock import bundles_lock
from bundler.local.verifycache import SidecarFacts, VerifiedBundle, VerifyCache


def gather_local(
    bundles_dir: Path,
    *,
    allow_partial: bool,
    progress: ProgressSink,
    cache: VerifyCache | None = None,
) -> tuple[list[LocalBundle], list[BundlePlan]]:
    """Verify every local bundle, once; a bundle that fails is refused, and a partial one is
    held back without --allow-partial: neither reaches the Hub. `cache` is the folder's verify
    cache when it is loaded already (sync loads it while its runs are found, the folder locked
    all along)."""
    accepted: dict[str, LocalBundle] = {}
    set_aside: list[BundlePlan] = []

    def refuse(label: str, detail: str) -> None:
        set_aside.append(
            BundlePlan(bundle_id=label, action="refused", outcome="refused", detail=detail)
        )

    cache = cache or VerifyCache(bundles_dir)  # an archive unchanged since it passed: not read
    for path in find_archive_paths([bundles_dir]):  # strings: thousands looked up by path
        identity = cache.stat(path)
        verified = cache.lookup(path, identity)
        if verified is None:
            archive = Path(path)
            # Verifying loads only for a bundle the cache does not vouch for: an upload of a
            # folder already verified never imports it (docs/performance.md).
            from bundler.local.verify import read_bundle

            reading = read_bundle(archive, progress)
            verification = reading.verification()
            if (
                not verification.ok
                or reading.sidecar is None
                or reading.sidecar_data is None
                or reading.metrics_text is None
            ):
                label = verification.bundle_id or str(archive)
                failures = verification.describe_failures()
                refuse(label, f"{archive}: failed verification ({failures})")
                continue
            verified = VerifiedBundle.of(
                reading.sidecar, reading.sidecar_data, reading.metrics_text
            )
            cache.record(archive, identity, verified)
        facts = verified.facts
        label = facts.bundle_id
        if facts.coverage_status == "partial" and not allow_partial:
            set_aside.append(
                BundlePlan(
                    bundle_id=label,
                    action="held-back",
                    outcome="held-back",
                    detail=f"partial coverage ({facts.rows_present} of "
                    f"{facts.expected_rows} rows): held back until its run is complete",
                    remedy="publish-partial",
                )
            )
            continue
        twin = accepted.get(label)
        if twin is not None:
            if twin.archive_sha256 != facts.archive_sha256:
                # Two different results under one name: neither may silently win.
                del accepted[label]
                refuse(label, f"{twin.archive_path} and {path} differ; publish one of them")
            continue  # an identical copy elsewhere in the folder is the same bundle
        accepted[label] = LocalBundle(archive_path=path, verified=verified)
    cache.save()
    return list(accepted.values()), set_aside


Gathered = tuple[list[LocalBundle], list[BundlePlan]]


class ParentWatch(NoProgress):
    """The verifying child's progress sink: it shows nothing, and ends the child once its
    parent is gone (bundler.core.forked), at each bundle it begins."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch

    def begin(self, label: str, total: int | None, *, unit: Unit = "items") -> None:
        self.advance()

    def advance(self, steps: int = 1) -> None:
        self.watch()


HUB_CLIENT_MODULES = (
    "bundler.hub.publish.destination",
    "bundler.hub.publish.evidence",
    "bundler.hub.publish.prepare",
    "bundler.hub.client.session",
    "bundler.hub.client.commit",
)
"""What publishing imports but the leaderboard's tables: the Hub client and the modules of
ours that drive it. Not pyarrow, which the tables need: it starts native threads as it loads,
and a process with threads may fork no more (bundler.core.forked)."""


def load_hub_client() -> None:
    """Import HUB_CLIENT_MODULES (about what hf pays for its own client; see
    docs/performance.md): done while a forked child verifies the bundles, where there is one.
    Calling it again costs nothing."""
    for name in HUB_CLIENT_MODULES:
        importlib.import_module(name)


class Verified:
    """`gather_local`'s result, pickled lean when a verifying child sends it to its parent:
    each bundle as its archive path, sidecar bytes, metrics text and facts. A pickle of the
    objects themselves spent most of its loading on paths made again part by part and on the
    sidecars the child parsed, which a bundle upload leaves alone needs not: its sidecar is
    parsed again from the same bytes when first asked for (bundler.local.verifycache)."""

    def __init__(self, gathered: Gathered) -> None:
        self.gathered = gathered

    def __reduce__(self) -> tuple[Callable[..., Verified], tuple[object, ...]]:
        local, set_aside = self.gathered
        names = tuple(SidecarFacts.__dataclass_fields__)
        return _verified, (
            [
                (
                    bundle.archive_path,
                    bundle.verified.sidecar_data,
                    bundle.verified.metrics_text,
                    tuple(getattr(bundle.verified.facts, name) for name in names),
                )
                for bundle in local
            ],
            set_aside,
        )


def _verified(
    local: list[tuple[str, bytes, str, tuple[Any, ...]]], set_aside: list[BundlePlan]
) -> Verified:
    """`Verified.__reduce__`'s inverse."""
    return Verified(
        (
            [
                LocalBundle(archive, VerifiedBundle(data, metrics, SidecarFacts(*facts)))
                for archive, data, metrics, facts in local
            ],
            set_aside,
        )
    )


@contextmanager
def verifying_ahead(
    bundles_dir: Path,
    *,
    allow_partial: bool,
    progress: ProgressSink,
    cache: VerifyCache | None = None,
) -> Iterator[Callable[[], Gathered]]:
    """Start `gather_local` and give a function that waits for its result: in a forked child
    where one may be forked (bundler.core.forked), else in line, with the same result. `cache`
    as for `gather_local`."""
    gather = partial(gather_local, bundles_dir, allow_partial=allow_partial, cache=cache)
    with ahead_in_child(
        lambda watch: Verified(gather(progress=ParentWatch(watch))),
        lambda: Verified(gather(progress=progress)),
    ) as verified:
        yield lambda: verified().gathered


def upload(
    bundles_dir: Path,
    options: UploadOptions,
    progress: ProgressSink | None = None,
    *,
    verify_cache: VerifyCache | None = None,
) -> UploadReport:
    """Verify the bundles in `bundles_dir` and publish them; see UploadReport for the outcome.
    The bundles verify in a forked child while the Hub client loads, where the console script
    allows one (bundler.core.forked). Raises HubAccessError for problems the user must fix
    first (token, access, repo, revision) and TemporaryError when the Hub could not be read
    (try again later), or when another run holds the folder longer than options.lock_wait
    (BundlesLockedError). A pull request's ref as the revision is a UsageError: commits to a
    branch carry the dataset card, which a pull request never touches, and --create-pr already
    finds and extends the submitter's own. `verify_cache` is the folder's verify cache when
    the caller loaded it already, holding the folder's lock (sync)."""
    if options.revision.startswith("refs/pr/"):
        raise PullRequestRevision(options.revision, target="bundles")
    with bundles_lock(bundles_dir, operation="upload", wait=options.lock_wait, create=False):
        ahead = verifying_ahead(
            bundles_dir,
            allow_partial=options.allow_partial,
            progress=progress or NoProgress(),
            cache=verify_cache,
        )
        with ahead as gathered:
            load_hub_client()  # the Hub client loads while bundles verify
            from bundler.hub.publish.publisher import Publisher

            publisher = Publisher(options, progress)
            local, set_aside = gathered()
        return say_what_happened(publisher.run(local, set_aside))


__all__ = ["HubError", "UploadOptions", "UploadReport", "load_hub_client", "upload"]
