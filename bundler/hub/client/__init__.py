"""The Hub client: one session over huggingface_hub, and what it needs to be used safely.

The session (its errors read into ones a user can act on, idempotent reads retried), the
commits re-planned on a head that moved, what a token may do on a repository, the Hub's rate
limits, how often a commit is tried, and what the Hub holds at a path as plain values. It
stands on the core alone: nothing else of the Hub wing, and no bundle format.
"""
