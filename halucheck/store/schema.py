"""The run database's schema: its named, ordered migrations (applied by :mod:`halucheck.store.migrations`,
recorded in the ``migrations`` table), the columns of the tables written column-wise, and :class:`Rows`,
how many rows go in at once. :mod:`halucheck.store.runstore` is the one that reads and writes them.
"""

from __future__ import annotations

import re

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_initial",
        """
        CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
        CREATE TABLE items (
            idx INTEGER PRIMARY KEY, id VARCHAR, line INTEGER, question VARCHAR, answer VARCHAR,
            context VARCHAR, truncated_at INTEGER, claims_done BOOLEAN DEFAULT FALSE);
        CREATE TABLE claims (
            claim_id VARCHAR PRIMARY KEY, item_idx INTEGER, ordinal INTEGER, text VARCHAR,
            question VARCHAR, span_start INTEGER, span_end INTEGER, evidence_done BOOLEAN DEFAULT FALSE);
        CREATE TABLE queries (claim_id VARCHAR, ordinal INTEGER, query VARCHAR);
        CREATE TABLE evidence (
            claim_id VARCHAR, rank INTEGER, source VARCHAR, start_char INTEGER, end_char INTEGER,
            score DOUBLE, text VARCHAR);
        CREATE TABLE turns (
            claim_id VARCHAR, ordinal INTEGER, state VARCHAR, role VARCHAR, opinion VARCHAR,
            factuality BOOLEAN, error_severity INTEGER, error VARCHAR, prompt_tokens INTEGER,
            completion_tokens INTEGER, cached_tokens INTEGER, latency_s DOUBLE);
        CREATE TABLE verdicts (
            claim_id VARCHAR PRIMARY KEY, factuality BOOLEAN, error_severity INTEGER, confidence DOUBLE,
            rounds INTEGER, consensus BOOLEAN, error VARCHAR);
        CREATE TABLE errors (item_idx INTEGER, line INTEGER, stage VARCHAR, message VARCHAR);
        CREATE TABLE stage_stats (
            stage VARCHAR, calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT,
            cached_tokens BIGINT, wall_s DOUBLE, recorded_at TIMESTAMP DEFAULT current_timestamp);
        CREATE TABLE llm_cache (
            key VARCHAR PRIMARY KEY, tag VARCHAR, text VARCHAR, parsed VARCHAR, prompt_tokens INTEGER,
            completion_tokens INTEGER, cached_tokens INTEGER, attempts INTEGER, latency_s DOUBLE);
        """,
    ),
    (
        "002_verdict_score",
        """
        ALTER TABLE turns ADD COLUMN p_factual DOUBLE;
        ALTER TABLE turns ADD COLUMN capped BOOLEAN DEFAULT FALSE;
        ALTER TABLE turns ADD COLUMN repaired VARCHAR;
        ALTER TABLE verdicts ADD COLUMN p_hallucinated DOUBLE;
        """,
    ),
    (
        # errors of one claim (failed queries), the own id of an unusable input line, failed LLM calls
        "003_failures",
        """
        ALTER TABLE errors ADD COLUMN claim_id VARCHAR;
        ALTER TABLE errors ADD COLUMN item_id VARCHAR;
        ALTER TABLE stage_stats ADD COLUMN failed_calls INTEGER DEFAULT 0;
        """,
    ),
    (
        # which verifier made each turn and decided each verdict (a cascade has several); NULL: the debate
        "004_verifier",
        """
        ALTER TABLE turns ADD COLUMN verifier VARCHAR;
        ALTER TABLE verdicts ADD COLUMN verifier VARCHAR;
        """,
    ),
    (
        # what kind of claim it is, which routes it: knowledge (the chosen verifier), calculation, citation
        "005_claim_kind",
        """
        ALTER TABLE claims ADD COLUMN kind VARCHAR DEFAULT 'knowledge';
        """,
    ),
    (
        # a cached reply keeps its token log-probabilities (JSON [[token, logprob], ...]; NULL: none were
        # asked for, or the reply was cached before this column): a replayed verdict keeps its score
        "006_cache_logprobs",
        """
        ALTER TABLE llm_cache ADD COLUMN logprobs VARCHAR;
        """,
    ),
    (
        # a provisional row: the cost of replies cached while a stage ran, written with them; the stage's
        # own row replaces the rows of its pass (NULL: a stage's own row)
        "007_provisional_costs",
        """
        ALTER TABLE stage_stats ADD COLUMN pass VARCHAR;
        """,
    ),
    (
        # a debate turn's own fields as JSON: a stance's finding, quotes and their checks, void; a Leader's
        # winner (NULL: none, or a turn written before this column)
        "008_turn_detail",
        """
        ALTER TABLE turns ADD COLUMN detail VARCHAR;
        """,
    ),
    (
        # the mark of a run database halucheck made (RunStore writes into, and --restart empties, no other)
        "009_made_by",
        """
        INSERT OR REPLACE INTO meta VALUES ('made_by', 'halucheck');
        """,
    ),
]

MIGRATIONS_TABLE = "migrations"  # where applied migrations are recorded


CACHE_COLUMNS = ("key", "tag", "text", "parsed", "prompt_tokens", "completion_tokens", "cached_tokens", "attempts",
                 "latency_s", "logprobs")
TURN_COLUMNS = ("claim_id", "ordinal", "state", "role", "opinion", "factuality", "error_severity", "error",
                "prompt_tokens", "completion_tokens", "cached_tokens", "latency_s", "p_factual", "capped", "repaired",
                "verifier", "detail")
VERDICT_COLUMNS = ("claim_id", "factuality", "error_severity", "confidence", "rounds", "consensus", "error",
                   "p_hallucinated", "verifier")

# the rows of a set of items (``?``: their indexes), by table: what a shard of a distributed run carries
# (halucheck.cluster). ``{db}``: the database whose claims the claim-id tables are found through
_OF_CLAIMS = "claim_id IN (SELECT claim_id FROM {db}claims WHERE item_idx IN (SELECT unnest(?)))"
SHARD_ROWS = {"items": "idx IN (SELECT unnest(?))", "claims": "item_idx IN (SELECT unnest(?))",
              "queries": _OF_CLAIMS, "evidence": _OF_CLAIMS, "turns": _OF_CLAIMS, "verdicts": _OF_CLAIMS,
              "errors": "item_idx IN (SELECT unnest(?))"}


class Rows:
    """Rows for one table, inserted column-wise: DuckDB scans a dict of numpy arrays in one statement,
    ~1000x faster than ``executemany`` (about 1 ms per row)."""

    def __init__(self, table: str, columns: tuple[str, ...], rows: list[tuple], verb: str = "INSERT",
                 key: str | None = None) -> None:
        """``key``: the table's primary key (the first of ``columns``), for ``INSERT OR REPLACE`` of rows with
        distinct keys: the rows whose key is stored already are deleted and all inserted plainly, as the upsert
        would leave them (DuckDB's upsert costs ~3x a plain insert: ~6 ms against ~2 ms for a reply's row)."""
        self.table, self.columns, self.rows, self.verb, self.key = table, columns, rows, verb, key

    _VALUES = re.compile(r"^\s*(INSERT(?: OR (?:REPLACE|IGNORE))?) INTO (\w+)\s*(?:\(([^)]*)\))?\s*VALUES",
                         re.IGNORECASE)

    @classmethod
    def bulk(cls, sql: str) -> bool:
        return bool(cls._VALUES.match(sql))

    @classmethod
    def from_sql(cls, sql: str, rows: list) -> "Rows":
        """The same insert as ``executemany(sql, rows)`` for ``INSERT INTO t [(cols)] VALUES (?, ...)``
        (a statement without a column list fills the table's columns in order)."""
        verb, table, cols = cls._VALUES.match(sql).groups()
        return cls(table, tuple(c.strip() for c in cols.split(",")) if cols else (), rows, verb.upper())

    def insert(self, con) -> None:
        if not self.rows:
            return
        import numpy as np

        columns = self.columns or tuple(
            r[0] for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
                [self.table]).fetchall())[:len(self.rows[0])]
        batch = {}
        for name, values in zip(columns, zip(*self.rows)):
            arr = np.empty(len(values), dtype=object)
            arr[:] = values
            batch[name] = arr
        cols = ", ".join(columns)
        verb = self.verb
        if self.key is not None and verb == "INSERT OR REPLACE":
            keys = [r[columns.index(self.key)] for r in self.rows]
            stored = con.execute(f"SELECT {self.key} FROM {self.table} WHERE {self.key} IN (SELECT unnest(?))",
                                 [keys]).fetchall()
            if stored:
                con.execute(f"DELETE FROM {self.table} WHERE {self.key} IN (SELECT unnest(?))", [[k for k, in stored]])
            verb = "INSERT"
        con.execute(f"{verb} INTO {self.table} ({cols}) SELECT {cols} FROM batch")
