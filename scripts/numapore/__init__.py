"""numapore: helpers shared by the workflow rules, scripts and tests."""
