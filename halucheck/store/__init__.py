"""The run database: every SQL statement about a run, and its schema migrations."""
