"""GitHub: the REST client, its API budget, runner registrations and tokens, credentials and GitHub Apps."""
