"""Re-checking a whole leaderboard from its bundles, as anyone may: `findings` judges (pure),
`pace` keeps the requests within the Hub's anonymous limits, `verdicts` remembers what was
verified, so a run stopped by a rate limit resumes, and `run` does the reading."""
