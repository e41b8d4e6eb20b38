"""Review's `signature` check: who vouches for a bundle, by the leaderboard's allowed signers.

A bundle's signature was checked against its archive when it was verified (the key's
fingerprint is `BundleVerification.signer`); here the leaderboard says whose key that is
(`leaderboard/allowed_signers`, bundler.hub.tasks.signers). A leaderboard that names no signers
asks for none: unsigned bundles pass there, as before signing existed, unless its task
definitions require signatures. A principal may be an
organization: its members' signatures pass, as far as the Hub lists them as members
(bundler.hub.tasks.signers.Memberships, asked by the gathering only when a key's principals do
not name the author). A line's `valid-after`/`valid-before` are judged at the review's now: a
pull request has not landed, and if merged it lands now (on the branch, a bundle is judged at
the time it landed, as git judges a signed commit at its time).
"""

from __future__ import annotations

from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.sshtime import openssh_time


def signature_check(
    signer: str | None,
    author: str,
    signers: AllowedSigners | None,
    *,
    required: bool,
    author_orgs: frozenset[str] = frozenset(),
    at: int,
) -> CheckResult:
    """Passes a signature by a key the allowed signers give to the pull request's author, or to
    an organization the Hub lists the author as a member of (`author_orgs`), at `at` (the
    `valid-after`/`valid-before` of its line judged then, as git judges a commit at its time);
    warns on an unsigned bundle (fails it where the task definitions require signatures); fails
    a key they do not list at `at`, or one of anyone else. Where signatures are required, an
    unsigned bundle fails even while the leaderboard names no signers: the rule holds before
    its first signer is added."""
    if signer is None:
        if signers is None and not required:
            return passed("signature", "unsigned; this leaderboard names no allowed signers")
        hint = "sign it with a key the leaderboard's maintainers allow"
        unsigned = failed if required else warned
        return unsigned("signature", "unsigned: no key vouches for this bundle", hint=hint)
    if signers is None:
        return passed("signature", "signed; this leaderboard names no allowed signers")
    principals = signers.principals_of(signer, at)
    if not principals:
        return failed(
            "signature",
            f"signed by key {signer}, which the leaderboard's allowed signers do not list as "
            f"valid at {openssh_time(at)} (a retired key vouches only for what landed before)",
            hint="a maintainer adds the key to the leaderboard's allowed signers",
        )
    if author in principals:
        return passed("signature", f"signed by {author} (key {signer})")
    if orgs := sorted(principals & author_orgs):
        return passed(
            "signature", f"signed by {orgs[0]}, which {author} is a member of (key {signer})"
        )
    return failed(
        "signature",
        f"signed by {', '.join(sorted(principals))} (key {signer}), not by the pull "
        f"request's author {author} nor an organization the Hub lists them in",
        hint="a bundle is signed by whoever proposes it, or by an organization whose "
        "membership they show on their Hub profile",
    )
