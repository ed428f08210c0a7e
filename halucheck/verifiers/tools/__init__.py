"""Tool checks: claims decided by a tool (arithmetic, bibliography, code run in a sandbox, corpus lookup), not by a judge."""
