"""Publishing verified bundles to a dataset repository: Stage 5, `bundler upload`.

`upload` verifies the local bundles and hands them on; `plan` decides from values alone what
the upload commits (and `pr_description` words the pull request it proposes); the rest carries
the plan out: `prepare` checks the repository exists and the token's rights there, `destination`
finds the submitter's pull request, `holdings` reads what the commits' target holds of the
bundles, `evidence` what more the plan asks for, and `publisher` makes the commits. `status`
tells a submitter where their pull requests stand, from the verdicts review posted on them. It
stands on the Hub client, the repository's files, the task definitions, the leaderboard, the
review's posted verdicts and readers of pull requests, the local bundle format and the core.
"""
