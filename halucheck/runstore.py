"""The run database: one DuckDB file per run directory holding every item, claim, query, evidence
passage, agent turn, verdict, error, timing and LLM reply. It is what makes a run resumable: finished
work is read back, not recomputed, and each write is one transaction (a kill never leaves half a claim).

Schema changes are named, ordered migrations recorded in the ``migrations`` table.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Iterable

from halucheck.errors import HalucheckError
from halucheck.records import Evidence, Turn, Verdict

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
]


class RunStore:
    """Typed access to a run's DuckDB file. Thread-safe: one lock around the connection."""

    def __init__(self, path: str | Path) -> None:
        import duckdb

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(str(self.path))
        except duckdb.Error as exc:
            raise HalucheckError(
                f"cannot open run database {self.path}: {str(exc).splitlines()[0]}; "
                "delete it (the run restarts) or use another --out"
            ) from None
        self.lock = threading.RLock()
        self._migrate()

    def _migrate(self) -> None:
        with self.lock:
            self.con.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP "
                "DEFAULT current_timestamp)"
            )
            done = {r[0] for r in self.con.execute("SELECT name FROM migrations").fetchall()}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                self.con.execute("BEGIN")
                self.con.execute(sql)
                self.con.execute("INSERT INTO migrations (name) VALUES (?)", [name])
                self.con.execute("COMMIT")

    def close(self) -> None:
        with self.lock:
            self.con.close()

    # -- helpers ---------------------------------------------------------------------------------
    def _tx(self, statements: Iterable[tuple[str, list]]) -> None:
        with self.lock:
            self.con.execute("BEGIN")
            try:
                for sql, params in statements:
                    if params and isinstance(params[0], (list, tuple)):
                        self.con.executemany(sql, params)
                    elif params != []:
                        self.con.execute(sql, params)
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        with self.lock:
            return self.con.execute(sql, params or []).fetchall()

    # -- meta --------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM meta WHERE key = ?", [key])
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._tx([("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])])

    # -- LLM cache -----------------------------------------------------------------------------------
    def cache_get(self, keys: list[str]) -> dict[str, tuple]:
        if not keys:
            return {}
        with self.lock:
            rows = self.con.execute(
                "SELECT key, text, parsed, prompt_tokens, completion_tokens, cached_tokens, attempts, latency_s "
                "FROM llm_cache WHERE key IN (SELECT unnest(?))",
                [keys],
            ).fetchall()
        return {r[0]: r[1:] for r in rows}

    def cache_put(self, rows: list[tuple]) -> None:
        if rows:
            self._tx([("INSERT OR REPLACE INTO llm_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)])

    # -- items and claims ------------------------------------------------------------------------
    def add_items(self, rows: list[tuple]) -> None:
        """rows: (idx, id, line, question, answer, context, truncated_at); existing ones are kept."""
        if rows:
            self._tx([("INSERT OR IGNORE INTO items (idx, id, line, question, answer, context, truncated_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)])

    def add_error(self, item_idx: int | None, line: int | None, stage: str, message: str) -> None:
        self._tx([("INSERT INTO errors VALUES (?, ?, ?, ?)", [item_idx, line, stage, message])])

    def save_claims(self, item_idx: int, claims: list[tuple]) -> None:
        """claims: (claim_id, ordinal, text, question, span_start, span_end). Marks the item done."""
        self._tx([
            ("DELETE FROM claims WHERE item_idx = ?", [item_idx]),
            ("INSERT INTO claims (claim_id, item_idx, ordinal, text, question, span_start, span_end) "
             "VALUES (?, ?, ?, ?, ?, ?, ?)", [(c[0], item_idx, *c[1:]) for c in claims]),
            ("UPDATE items SET claims_done = TRUE WHERE idx = ?", [item_idx]),
        ])

    def save_evidence(self, claim_id: str, queries: list[str], evidence: list[Evidence]) -> None:
        self._tx([
            ("DELETE FROM queries WHERE claim_id = ?", [claim_id]),
            ("DELETE FROM evidence WHERE claim_id = ?", [claim_id]),
            ("INSERT INTO queries VALUES (?, ?, ?)", [(claim_id, i, q) for i, q in enumerate(queries)]),
            ("INSERT INTO evidence VALUES (?, ?, ?, ?, ?, ?, ?)",
             [(claim_id, i, e.source, e.start, e.end, e.score, e.text) for i, e in enumerate(evidence)]),
            ("UPDATE claims SET evidence_done = TRUE WHERE claim_id = ?", [claim_id]),
        ])

    def save_verdict(self, claim_id: str, v: Verdict) -> None:
        self._tx([
            ("DELETE FROM turns WHERE claim_id = ?", [claim_id]),
            ("DELETE FROM verdicts WHERE claim_id = ?", [claim_id]),
            ("INSERT INTO turns (claim_id, ordinal, state, role, opinion, factuality, error_severity, error, "
             "prompt_tokens, completion_tokens, cached_tokens, latency_s, p_factual, capped, repaired) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             [(claim_id, i, t.state, t.role, t.opinion, t.factuality, t.error_severity, t.error,
               t.prompt_tokens, t.completion_tokens, t.cached_tokens, t.latency_s, t.p_factual, t.capped,
               t.repaired)
              for i, t in enumerate(v.chain)]),
            ("INSERT INTO verdicts (claim_id, factuality, error_severity, confidence, rounds, consensus, error, "
             "p_hallucinated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
             [claim_id, v.factuality, v.error_severity, v.confidence, v.rounds, v.consensus, v.error,
              v.p_hallucinated]),
        ])

    def add_stage_stats(self, stage: str, calls: int, prompt_tokens: int, completion_tokens: int,
                        cached_tokens: int, wall_s: float) -> None:
        self._tx([("INSERT INTO stage_stats (stage, calls, prompt_tokens, completion_tokens, cached_tokens, "
                   "wall_s) VALUES (?, ?, ?, ?, ?, ?)",
                   [stage, calls, prompt_tokens, completion_tokens, cached_tokens, wall_s])])

    # -- reading back ----------------------------------------------------------------------------
    def evidence_for(self, claim_id: str) -> list[Evidence]:
        return [Evidence(text=r[4], source=r[0], start=r[1], end=r[2], score=r[3]) for r in self.query(
            "SELECT source, start_char, end_char, score, text FROM evidence WHERE claim_id = ? ORDER BY rank",
            [claim_id])]

    def all_evidence(self) -> dict[str, list[Evidence]]:
        """Every claim's evidence in rank order, in one query (for reports over many claims)."""
        out: dict[str, list[Evidence]] = {}
        for cid, source, s, e, score, text in self.query(
                "SELECT claim_id, source, start_char, end_char, score, text FROM evidence ORDER BY claim_id, rank"):
            out.setdefault(cid, []).append(Evidence(text=text, source=source, start=s, end=e, score=score))
        return out

    def all_queries(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for cid, q in self.query("SELECT claim_id, query FROM queries ORDER BY claim_id, ordinal"):
            out.setdefault(cid, []).append(q)
        return out

    def all_verdicts(self) -> dict[str, Verdict]:
        """Every verdict with its chain of turns, in two queries."""
        chains: dict[str, list[Turn]] = {}
        for cid, *turn in self.query(
                "SELECT claim_id, state, role, opinion, factuality, error_severity, error, prompt_tokens, "
                "completion_tokens, cached_tokens, latency_s, p_factual, coalesce(capped, FALSE), repaired "
                "FROM turns ORDER BY claim_id, ordinal"):
            chains.setdefault(cid, []).append(Turn(*turn))
        return {cid: Verdict(f, sev, conf, chains.get(cid, []), rounds, consensus, err, p_h)
                for cid, f, sev, conf, rounds, consensus, err, p_h in self.query(
                    "SELECT claim_id, factuality, error_severity, confidence, rounds, consensus, error, "
                    "p_hallucinated FROM verdicts")}


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)
