"""trialfleet's test suite."""
