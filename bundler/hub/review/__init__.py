"""Reviewing the pull requests of a dataset repository: Stage 7, `bundler review`.

`round` reviews each pull request asked for, one at a time, in three steps: `gather` reads what
its review needs from the Hub, `judge` runs the checks on those values (pure; `changes` tells
what the PR changes from the Hub's diff and its trees, `acceptance` is the verdict `--accept`
merges by), and `act` posts the report (its verdicts as data too: `posted`, which publishing's
`status` reads back) and merges, when asked. It stands on the Hub client, the repository's
files, the task definitions, the leaderboard (a merge rewrites its tables and card), the local
bundle format and the core; never on publishing.
"""
