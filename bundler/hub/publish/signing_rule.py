"""The maintainers' rule that every bundle be signed (`require_signature` in the task
definitions, bundler.hub.maintain.signers_require), applied to what an upload is about to publish.

A bundle that verified and holds a signature was signed by the key its signature names (the
signature is checked against the archive's bytes when it is verified); whether that key is an
allowed signer's is for review and audit to judge, by the pull request's author or the commit.
"""

from __future__ import annotations

from dataclasses import replace

from bundler.hub.publish.plan import Decision, LocalBundle, RepositoryView
from bundler.hub.repo.paths import TASKS_FILE


def apply_signing_rule(
    decision: Decision, bundle: LocalBundle, view: RepositoryView, *, create_pr: bool
) -> tuple[Decision, str | None]:
    """`decision` under the rule, and a warning for the report: an unsigned bundle about to be
    published to the branch is refused (the others still go); one proposed in a pull request
    goes, with a warning that review will fail it. Nothing changes where the rule is not set,
    nor for a bundle not being published."""
    rule = view.definitions is not None and view.definitions.require_signature
    if not rule or not decision.plan.to_publish or bundle.sidecar.signature is not None:
        return decision, None
    why = f"unsigned, where the task definitions on {view.base} require a signature ({TASKS_FILE})"
    if create_pr:
        return decision, f"{bundle.bundle_id}: {why}: review will fail it"
    plan = decision.plan
    plan.action, plan.outcome, plan.detail, plan.remedy = "refused", "refused", why, "sign-bundle"
    return replace(decision, row=None, proposal=None), None
