"""The run database: one DuckDB file per run directory holding every item, claim, query, evidence
passage, agent turn, verdict, error, timing and LLM reply. It is what makes a run resumable: finished
work is read back, not recomputed, and each batch of results is written in one transaction (a kill never
leaves half a claim; it loses at most the batch in flight, whose LLM replies are already cached).

Failed work is stored as failed, never as done: an item whose claim extraction failed keeps
``claims_done`` false, a claim whose queries failed keeps ``evidence_done`` false, a debate without a
valid verdict (or with a failed turn) is debated again. Errors are replaced when the work is retried, so
the reports show only the failures that still stand.

Schema changes are named, ordered migrations (``MIGRATIONS`` in :mod:`halucheck.store.schema`, applied by
:mod:`halucheck.store.migrations`) recorded in the ``migrations`` table.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Iterable, Sequence

from halucheck.errors import disk_problem
from halucheck.records import Claim, Cost, Evidence, Turn, Verdict
from halucheck.store import migrations
from halucheck.store.errors import (RunStoreDiskError, RunStoreError, could_be_duckdb, damaged, disk_failure,
                                    first_line, foreign, in_use, in_use_error, is_damage)
from halucheck.store.schema import (CACHE_COLUMNS, MIGRATIONS, MIGRATIONS_TABLE, SHARD_ROWS, TURN_COLUMNS,
                                    VERDICT_COLUMNS, Rows)
from halucheck.store.rows import CachedReply, ClaimRow, ErrorRow, FoundEvidence, ItemRow, Pending, RunContents

MAX_DEFER_S = 2.0  # the longest a deferred LLM reply waits for a transaction to be written in

ONCE = "once"  # marks a _tx statement executed once with list parameters (not executemany)

# errors written by the claims stage for an item; replaced when the item is tried again
ITEM_STAGES = ("filter", "extract", "claims-warning")

# a claim with evidence and no clean verdict: never verified, no valid verdict, or a failed turn (claims c, verdicts v)
_TO_VERIFY = ("c.evidence_done AND (v.claim_id IS NULL OR v.factuality IS NULL OR c.claim_id IN "
              "(SELECT claim_id FROM turns WHERE error IS NOT NULL))")


class RunStore:
    """Typed access to a run's DuckDB file. Thread-safe: one lock around the connection.

    Writes come in batches, one transaction each (a transaction costs milliseconds; one per answer made
    bookkeeping the bulk of a run). ``restart`` empties the database instead of deleting the file, so a
    run still in progress elsewhere, which holds DuckDB's file lock, is never thrown away.
    """

    def __init__(self, path: str | Path, restart: bool = False, read_only: bool = False) -> None:
        """``read_only``: only read (reports of a run whose folder cannot be written); nothing is migrated."""
        import duckdb

        self.path = Path(path)
        self.lock = threading.RLock()
        self._pending_cache: dict[str, CachedReply] = {}  # deferred replies, written by the next _tx
        self._pending_since = 0.0
        self._provisional: tuple[str, str] | None = None  # (stage, pass) whose cached replies are counted
        self._failed = False  # a write failed for the disk: close() writes nothing more
        if read_only:
            self._open_read_only()
            return
        if self.path.is_dir():
            raise RunStoreError(f"{self.path} is a folder, not a run database; halucheck leaves it as it is: choose "
                                "another --out, or rename that folder")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._failure(exc) from None
        try:
            self.con = duckdb.connect(str(self.path))
        except duckdb.Error as exc:
            if disk_problem(exc):
                raise self._failure(exc) from None
            if in_use(exc):
                raise in_use_error(self.path, exc) from None
            if not could_be_duckdb(self.path):
                raise foreign(self.path, f"it is not a DuckDB file ({first_line(exc)})") from None
            if restart and is_damage(exc):  # nothing of a damaged file is kept by a restart anyway
                self._remove_files()
                self.con = duckdb.connect(str(self.path))
            else:
                raise damaged(self.path, exc) from None
        try:
            self._check_made_by_halucheck()
            if restart:
                self._drop_everything()
            self._migrate()
        except duckdb.Error as exc:
            self.con.close()
            if disk_problem(exc):
                raise self._failure(exc) from None
            if restart and is_damage(exc):
                self._remove_files()
                self.con = duckdb.connect(str(self.path))
                self._migrate()
            else:
                raise damaged(self.path, exc) from None

    def _open_read_only(self) -> None:
        import duckdb

        try:
            self.con = duckdb.connect(str(self.path), read_only=True)
            done = migrations.recorded(self.con, MIGRATIONS_TABLE)
        except duckdb.Error as exc:
            if in_use(exc):
                raise RunStoreError(f"run database {self.path} is in use by another halucheck process; wait for "
                                    "it to finish, then run again") from None
            raise damaged(self.path, exc) from None
        if done is None or any(name not in done for name, _ in MIGRATIONS):
            self.con.close()
            raise RunStoreDiskError(
                f"run database {self.path} is read-only and was made by an older halucheck (or is not a run "
                f"database): make {self.path.parent} writable so it can be brought up to date, then run the same "
                "command again")

    def _check_made_by_halucheck(self) -> None:
        """Refuse a DuckDB file halucheck did not make (a user's own ``run.duckdb`` in --out): nothing is written
        into it, and --restart does not empty it. Halucheck's carry the ``made_by`` row (migration 009), or,
        made before that row, the record of its first migration; a file without tables is a new one."""
        tables = [r[0] for r in self.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY 1").fetchall()]
        if not tables:
            return
        done = migrations.recorded(self.con, MIGRATIONS_TABLE) if MIGRATIONS_TABLE in tables else None
        made_by = None
        if "meta" in tables:
            try:
                row = self.con.execute("SELECT value FROM meta WHERE key = 'made_by'").fetchone()
                made_by = row[0] if row else None
            except Exception:  # a table of that name that is not ours
                made_by = None
        if made_by == "halucheck" or (done is not None and MIGRATIONS[0][0] in done and "meta" in tables):
            return
        if tables == [MIGRATIONS_TABLE] and not done:  # stopped before its first migration: a new one
            return
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        self.con.close()
        raise foreign(self.path, f"it holds tables halucheck did not make: {shown}")

    def _failure(self, exc: BaseException) -> BaseException:
        """The one-line error for ``exc``: the disk full or read-only, the file damaged (after which nothing
        more is written); else ``exc``."""
        failure = disk_failure(self.path, exc) or (damaged(self.path, exc) if is_damage(exc) else None)
        if failure is None:
            return exc
        self._failed = True
        return failure

    def _remove_files(self) -> None:
        for p in (self.path, Path(str(self.path) + ".wal")):
            p.unlink(missing_ok=True)

    def _drop_everything(self) -> None:
        with self.lock:
            for (name,) in self.con.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall():
                self.con.execute(f'DROP TABLE "{name}"')

    def _migrate(self) -> None:
        with self.lock:
            migrations.apply(self.con, MIGRATIONS, table=MIGRATIONS_TABLE)

    def close(self) -> None:
        import duckdb

        with self.lock:
            try:
                if self._pending_cache and not self._failed:
                    self._tx([])
            finally:
                try:
                    self.con.close()
                except duckdb.Error:  # a database DuckDB gave up on after a failed write: nothing to keep
                    pass

    def count_cached_replies(self, stage: str | None) -> None:
        """From now on, each LLM reply cached is counted at once, in the transaction that writes it, as a
        provisional cost of ``stage``; the stage's own costs (the ``stats`` of ``save_*``) replace those
        rows when they are written. A run stopped in between keeps the cost of every reply it kept (a
        resumed run asks those no more). None: stop counting."""
        with self.lock:
            self._provisional = (stage, uuid.uuid4().hex) if stage else None

    # -- helpers ---------------------------------------------------------------------------------
    def _tx(self, statements: Iterable[tuple]) -> None:
        """Run ``statements`` in one transaction. Each is ``(sql, params)`` (params: one row, a list of
        rows, or ``[]`` to skip it), ``(sql, params, ONCE)`` (one execution with list parameters; skipped
        when params is empty) or ``(Rows(...),)`` for a bulk insert."""
        import duckdb

        with self.lock:
            pending = self._take_pending_cache()
            if pending:
                statements = [(Rows("llm_cache", CACHE_COLUMNS, [r.row() for r in pending], verb="INSERT OR REPLACE",
                                    key="key"),),
                              *self._provisional_cost(pending), *statements]
            try:
                self.con.execute("BEGIN")
                try:
                    for st in statements:
                        if isinstance(st[0], Rows):
                            st[0].insert(self.con)
                            continue
                        sql, params = st[:2]
                        if len(st) == 3:  # (sql, params, ONCE): one execution, params may hold lists
                            if params:
                                self.con.execute(sql, params)
                        elif params and isinstance(params[0], (list, tuple)) and Rows.bulk(sql):
                            Rows.from_sql(sql, params).insert(self.con)  # many rows of an INSERT ... VALUES
                        elif params and isinstance(params[0], (list, tuple)):
                            self.con.executemany(sql, params)
                        elif params != []:
                            self.con.execute(sql, params)
                    self.con.execute("COMMIT")
                except BaseException:
                    try:
                        self.con.execute("ROLLBACK")
                    except duckdb.Error:  # a COMMIT that failed (a full disk) has rolled back already
                        pass
                    for r in pending:  # not written: keep them for the next transaction
                        self._pending_cache.setdefault(r.key, r)
                    raise
            except duckdb.Error as exc:
                failure = self._failure(exc)
                if failure is not exc:
                    raise failure from None
                raise

    def query(self, sql: str, params: list | None = None) -> list:
        """The rows of one SQL statement, as DuckDB gives them (this class's own reads, and tests)."""
        import duckdb

        with self.lock:
            try:
                return self.con.execute(sql, params or []).fetchall()
            except duckdb.Error as exc:
                failure = self._failure(exc)
                if failure is not exc:
                    raise failure from None
                raise

    # -- meta --------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM meta WHERE key = ?", [key])
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._tx([("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])])

    # -- LLM cache -----------------------------------------------------------------------------------
    def cache_get(self, keys: list[str]) -> dict[str, CachedReply]:
        """The cached replies of ``keys`` (those not cached are left out)."""
        if not keys:
            return {}
        with self.lock:
            pending = {k: self._pending_cache[k] for k in keys if k in self._pending_cache}
        rows = self.query(f"SELECT {', '.join(CACHE_COLUMNS)} FROM llm_cache WHERE key IN (SELECT unnest(?))",
                          [[k for k in keys if k not in pending]])
        return {**{r[0]: CachedReply(*r) for r in rows}, **pending}

    def cache_put(self, rows: list[CachedReply], defer: bool = False) -> None:
        """Keep ``rows`` in the reply cache (a reply of a key cached already replaces it).

        ``defer``: the rows join the next transaction instead of one of their own (a commit costs
        milliseconds, several times a reply's own row). Deferred rows wait at most ``MAX_DEFER_S``: the first
        call once they are due (:meth:`deferred_wait`) writes them, whatever it brings."""
        with self.lock:
            if rows and not self._pending_cache:
                self._pending_since = time.monotonic()
            for r in rows:
                self._pending_cache[r.key] = r
            if self._pending_cache and (not defer or self.deferred_wait() == 0.0):
                self._tx([])

    def deferred_wait(self) -> float | None:
        """Seconds until the deferred replies are due to be written (0.0: they are); None when none wait."""
        with self.lock:
            if not self._pending_cache:
                return None
            return max(0.0, MAX_DEFER_S - (time.monotonic() - self._pending_since))

    def _take_pending_cache(self) -> list[CachedReply]:
        rows = list(self._pending_cache.values())
        self._pending_cache.clear()
        return rows

    # -- items and claims ------------------------------------------------------------------------
    def add_items(self, items: list[ItemRow]) -> None:
        """The input's items; those stored already are kept."""
        if items:
            self._tx([(Rows("items", ("idx", "id", "line", "question", "answer", "context", "truncated_at"),
                            [(i.idx, i.id, i.line, i.question, i.answer, i.context, i.truncated_at) for i in items],
                            verb="INSERT OR IGNORE"),)])

    def set_input_problems(self, problems: list[ErrorRow]) -> None:
        """The input's unusable lines and warnings; they replace the ones stored before (the same input gives
        the same problems)."""
        self._tx([
            ("DELETE FROM errors WHERE stage IN ('input', 'input-warning')", None),
            (Rows("errors", ("item_idx", "line", "stage", "message", "item_id"),
                  [(e.item_idx, e.line, e.stage, e.message, e.item_id) for e in problems]),),
        ])

    def add_error(self, item_idx: int | None, line: int | None, stage: str, message: str) -> None:
        self._tx([("INSERT INTO errors (item_idx, line, stage, message) VALUES (?, ?, ?, ?)",
                   [item_idx, line, stage, message])])

    def save_claims(self, item_idx: int, claims: list[ClaimRow]) -> None:
        """The item's claims, replacing those it had; marks the item done."""
        self._tx([("DELETE FROM claims WHERE item_idx = ?", [item_idx])])
        self.save_claims_batch({item_idx: claims}, [], [item_idx])

    def save_claims_batch(self, done: dict[int, list[ClaimRow]], errors: list[ErrorRow], tried: list[int],
                          costs: dict[str, Cost] | None = None) -> None:
        """One batch of the claims stage in one transaction. ``done``: item -> its claims, for items not done
        yet (which have no claims: claims and the done mark are written together), marked done; ``errors``: this
        attempt's; ``tried``: the items attempted that have earlier claims-stage errors, which are dropped;
        ``costs``: what the stage spent (stage name -> cost)."""
        items = list(done)
        claim_rows = [(c.claim_id, i, c.ordinal, c.claim.text, c.claim.question, c.claim.start, c.claim.end,
                       c.claim.kind) for i, cs in done.items() for c in cs]
        self._tx([
            ("DELETE FROM errors WHERE item_idx IN (SELECT unnest(?)) AND stage IN (SELECT unnest(?))",
             [tried, list(ITEM_STAGES)] if tried else [], ONCE),
            (Rows("claims", ("claim_id", "item_idx", "ordinal", "text", "question", "span_start", "span_end",
                             "kind"), claim_rows),),
            ("UPDATE items SET claims_done = TRUE WHERE idx IN (SELECT unnest(?))", [items] if items else [], ONCE),
            (Rows("errors", ("item_idx", "line", "stage", "message"),
                  [(e.item_idx, e.line, e.stage, e.message) for e in errors]),),
            *self._cost_statements(costs),
        ])

    def mark_evidence_done(self, kind: str) -> None:
        """Claims of ``kind`` need no evidence (a calculation is evaluated): mark them done without any."""
        self._tx([("UPDATE claims SET evidence_done = TRUE WHERE NOT evidence_done AND kind = ?", [kind])])

    def save_evidence(self, claim_id: str, queries: list[str], evidence: list[Evidence]) -> None:
        self.save_evidence_batch([FoundEvidence(claim_id, queries, evidence)], [], [claim_id])

    def save_evidence_batch(self, done: list[FoundEvidence], errors: list[ErrorRow], tried: list[str],
                            costs: dict[str, Cost] | None = None) -> None:
        """One batch of the evidence stage. ``done``: claims without evidence yet (so without queries: both are
        written with the done mark), marked done; ``errors``: of claims whose queries failed (left not done);
        ``tried``: the claims attempted that have earlier errors, which are dropped; ``costs``: what the stage
        spent (stage name -> cost)."""
        ids = [d.claim_id for d in done]
        self._tx([
            ("DELETE FROM errors WHERE claim_id IN (SELECT unnest(?))", [tried] if tried else [], ONCE),
            (Rows("queries", ("claim_id", "ordinal", "query"),
                  [(d.claim_id, i, q) for d in done for i, q in enumerate(d.queries)]),),
            (Rows("evidence", ("claim_id", "rank", "source", "start_char", "end_char", "score", "text"),
                  [(d.claim_id, i, e.source, e.start, e.end, e.score, e.text)
                   for d in done for i, e in enumerate(d.evidence)]),),
            ("UPDATE claims SET evidence_done = TRUE WHERE claim_id IN (SELECT unnest(?))", [ids] if ids else [], ONCE),
            (Rows("errors", ("item_idx", "line", "claim_id", "stage", "message"),
                  [(e.item_idx, e.line, e.claim_id, e.stage, e.message) for e in errors]),),
            *self._cost_statements(costs),
        ])

    def save_verdict(self, claim_id: str, v: Verdict) -> None:
        self.save_verdicts([(claim_id, v)], replace={claim_id})

    def save_verdicts(self, verdicts: dict[str, Verdict], costs: dict[str, Cost] | None = None,
                      replace: set[str] | None = None) -> None:
        """Verdicts (claim id -> verdict) with their chains of turns in one transaction; the earlier attempt of a
        claim in ``replace`` (claims verified before) is deleted first; ``costs``: what each verifier spent."""
        ids = [cid for cid in verdicts if cid in (replace or ())]
        self._tx([
            ("DELETE FROM turns WHERE claim_id IN (SELECT unnest(?))", [ids] if ids else [], ONCE),
            ("DELETE FROM verdicts WHERE claim_id IN (SELECT unnest(?))", [ids] if ids else [], ONCE),
            (Rows("turns", TURN_COLUMNS,
                  [(cid, i, t.state, t.role, t.opinion, t.factuality, t.error_severity, t.error,
                    t.prompt_tokens, t.completion_tokens, t.cached_tokens, t.latency_s, t.p_factual, t.capped,
                    t.repaired, t.verifier, dumps(t.detail()) if t.detail() else None)
                   for cid, v in verdicts.items() for i, t in enumerate(v.chain)]),),
            (Rows("verdicts", VERDICT_COLUMNS,
                  [(cid, v.factuality, v.error_severity, v.confidence, v.rounds, v.consensus, v.error,
                    v.p_hallucinated, v.verifier)
                   for cid, v in verdicts.items()]),),
            *self._cost_statements(costs),
        ])

    def add_stage_cost(self, stage: str, cost: Cost) -> None:
        self._tx(self._cost_statements({stage: cost}))

    def _cost_statements(self, costs: dict[str, Cost] | None) -> list:
        """The stage_stats rows of ``costs`` (stage -> cost); each replaces the provisional costs counted so far
        (:meth:`count_cached_replies`)."""
        out: list = []
        for stage, c in (costs or {}).items():
            if self._provisional:
                out.append(("DELETE FROM stage_stats WHERE pass = ?", [self._provisional[1]]))
            out.append(("INSERT INTO stage_stats (stage, calls, prompt_tokens, completion_tokens, cached_tokens, "
                        "wall_s, failed_calls) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [stage, c.llm_calls, c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.wall_s,
                         c.failed_calls]))
        return out

    def _provisional_cost(self, cached: list[CachedReply]) -> list:
        """The provisional stage_stats row of the calls behind ``cached`` replies (none when not counting)."""
        if self._provisional is None:
            return []
        stage, pass_id = self._provisional
        calls, pt, ct, cached_t = (sum(getattr(r, f) or 0 for r in cached)
                                   for f in ("attempts", "prompt_tokens", "completion_tokens", "cached_tokens"))
        return [("INSERT INTO stage_stats (stage, calls, prompt_tokens, completion_tokens, cached_tokens, wall_s, "
                 "failed_calls, pass) VALUES (?, ?, ?, ?, ?, 0, 0, ?)", [stage, calls, pt, ct, cached_t, pass_id])]

    # -- what is left to do (the pipeline's resume) ------------------------------------------------
    def now(self):
        """The database's clock (stage statistics are stamped with it)."""
        return self.query("SELECT current_timestamp::TIMESTAMP")[0][0]

    def standing_failures(self) -> list[str]:
        """Messages of the failures still standing: failed claims or queries stages, failed agent turns."""
        return [m for (m,) in self.query(
            "SELECT message FROM errors WHERE stage IN ('filter', 'extract', 'queries') "
            "UNION ALL SELECT error FROM turns WHERE error IS NOT NULL") if m]

    def pending(self) -> Pending:
        """The work left: answers without claims, claims without evidence, claims without a clean verdict."""
        (items,), = self.query("SELECT count(*) FROM items WHERE NOT claims_done")
        (evidence,), = self.query("SELECT count(*) FROM claims WHERE NOT evidence_done")
        (debates,), = self.query(
            f"SELECT count(*) FROM claims c LEFT JOIN verdicts v USING (claim_id) WHERE {_TO_VERIFY}")
        return Pending(items, evidence, debates)

    def items_with_claims(self) -> set[int]:
        return {r[0] for r in self.query("SELECT idx FROM items WHERE claims_done")}

    def items_with_errors(self, stages: Sequence[str]) -> set[int]:
        """Items with an error of one of ``stages`` (an earlier attempt's, replaced by this one's outcome)."""
        return {r[0] for r in self.query("SELECT DISTINCT item_idx FROM errors WHERE stage IN (SELECT unnest(?))",
                                         [list(stages)])}

    def claims_with_errors(self) -> set[str]:
        return {r[0] for r in self.query("SELECT DISTINCT claim_id FROM errors WHERE claim_id IS NOT NULL")}

    def claims_without_evidence(self, kind: str | None = None) -> list[ClaimRow]:
        """The claims without evidence (of ``kind`` only, if given), in answer order."""
        where = "NOT c.evidence_done" + (" AND c.kind = ?" if kind else "")
        return self._claim_rows(where, [kind] if kind else [])

    def claims_to_verify(self) -> list[ClaimRow]:
        """The claims with evidence and no clean verdict: never verified, no valid verdict, or a failed turn
        (``verified``: one that has a verdict to replace)."""
        return self._claim_rows(_TO_VERIFY)

    def _claim_rows(self, where: str = "TRUE", params: list | None = None) -> list[ClaimRow]:
        return [ClaimRow(cid, idx, ordinal, Claim(text, question, kind, start, end), verified)
                for cid, idx, ordinal, text, question, kind, start, end, verified in self.query(
                    "SELECT c.claim_id, c.item_idx, c.ordinal, c.text, c.question, coalesce(c.kind, 'knowledge'), "
                    "c.span_start, c.span_end, v.claim_id IS NOT NULL FROM claims c LEFT JOIN verdicts v "
                    f"USING (claim_id) WHERE {where} ORDER BY c.item_idx, c.ordinal", params)]

    def claims_with_evidence_from(self, files: Sequence[str]) -> list[str]:
        """The claims with a passage of one of ``files`` (a document of a file is the file's path, or the
        path and ``#L<line>`` for a line of a .jsonl corpus file), in answer order."""
        if not files:
            return []
        return [r[0] for r in self.query(
            "SELECT c.claim_id FROM claims c WHERE c.claim_id IN (SELECT claim_id FROM evidence WHERE "
            "source IN (SELECT unnest(?)) OR split_part(source, '#L', 1) IN (SELECT unnest(?))) "
            "ORDER BY c.item_idx, c.ordinal", [list(files), list(files)])]

    def recheck(self, claim_ids: Sequence[str]) -> None:
        """Send claims back to the evidence stage: their queries, evidence, verdicts and turns are dropped
        (the reply cache keeps every reply, so their queries come back at no cost)."""
        ids = list(claim_ids)
        if not ids:
            return
        self._tx([(f"DELETE FROM {table} WHERE claim_id IN (SELECT unnest(?))", [ids], ONCE)
                  for table in ("queries", "evidence", "turns", "verdicts")] +
                 [("UPDATE claims SET evidence_done = FALSE WHERE claim_id IN (SELECT unnest(?))", [ids], ONCE)])

    # -- shards of a distributed run (halucheck.cluster) ----------------------------------------------
    def items_with_work(self) -> list[int]:
        """The items with work left, in input order: no claims yet, a claim without evidence, or a claim
        without a clean verdict (as :meth:`claims_to_verify`)."""
        return [r[0] for r in self.query(
            "SELECT idx FROM items WHERE NOT claims_done UNION SELECT c.item_idx FROM claims c "
            "LEFT JOIN verdicts v USING (claim_id) WHERE NOT c.evidence_done OR v.claim_id IS NULL "
            "OR v.factuality IS NULL OR c.claim_id IN (SELECT claim_id FROM turns WHERE error IS NOT NULL) "
            "ORDER BY 1")]

    def write_shard(self, path: str | Path, items: Sequence[int]) -> None:
        """A new run database at ``path`` with the work of ``items`` so far (all but replies): a worker's."""
        RunStore(path, restart=True).close()
        self._with_shard(path, [
            (f"INSERT INTO shard.{table} BY NAME SELECT * FROM {table} WHERE {where.format(db='')}", [list(items)],
             ONCE) for table, where in SHARD_ROWS.items()])

    def merge_shard(self, path: str | Path, items: Sequence[int]) -> None:
        """Replace the work of ``items`` by the shard's at ``path`` (a run database made by
        :meth:`write_shard` and worked on), in one transaction; its replies join the cache and its costs
        the stage statistics. Merged twice, a shard leaves the same rows."""
        ids = [list(items)]
        self._with_shard(path, [
            *[(f"DELETE FROM {table} WHERE {where.format(db='')}", ids, ONCE) for table, where in SHARD_ROWS.items()
              if table != "claims"],  # the claim-id tables find their rows through claims: those go last
            ("DELETE FROM claims WHERE item_idx IN (SELECT unnest(?))", ids, ONCE),
            *[(f"INSERT INTO {table} BY NAME SELECT * FROM shard.{table} WHERE {where.format(db='shard.')}", ids, ONCE)
              for table, where in SHARD_ROWS.items()],
            ("INSERT OR IGNORE INTO llm_cache BY NAME SELECT * FROM shard.llm_cache", None),
            ("INSERT INTO stage_stats BY NAME SELECT * FROM shard.stage_stats", None),
        ], read_only=True)

    def _with_shard(self, path: str | Path, statements: list[tuple], read_only: bool = False) -> None:
        with self.lock:
            self.query(f"ATTACH ? AS shard{' (READ_ONLY)' if read_only else ''}", [str(path)])
            try:
                self._tx(statements)
            finally:
                self.query("DETACH shard")

    # -- what the reports read -------------------------------------------------------------------
    def contents(self) -> RunContents:
        """Everything the reports read, in one pass: a few whole-table reads, not queries per claim (a report of
        100k claims stays seconds)."""
        with self.lock:
            items = [ItemRow(*row) for row in self.query(
                "SELECT idx, id, line, question, answer, context, truncated_at, claims_done FROM items ORDER BY idx")]
            claims: dict[int, list[ClaimRow]] = {}
            for row in self._claim_rows():
                claims.setdefault(row.item_idx, []).append(row)
            errors = [ErrorRow(stage, message, idx, None, cid) for idx, cid, stage, message in self.query(
                "SELECT item_idx, claim_id, stage, message FROM errors WHERE item_idx IS NOT NULL "
                "ORDER BY item_idx, line, stage")]
            unusable = [ErrorRow(stage, message, None, line, None, item_id) for line, stage, message, item_id in
                        self.query("SELECT line, stage, message, item_id FROM errors WHERE item_idx IS NULL AND "
                                   "stage = 'input'")]
            return RunContents(items, claims, self.all_evidence(), self.all_queries(), self.all_verdicts(), errors,
                               unusable)

    def stage_totals(self) -> dict[str, Cost]:
        """Each stage's cost summed over every run of this folder, in the order the stages first ran."""
        return {stage: Cost(0, int(calls or 0), int(pt or 0), int(ct or 0), int(cached or 0), int(failed or 0),
                            wall or 0.0)
                for stage, calls, pt, ct, cached, wall, failed in self.query(
                    "SELECT stage, sum(calls), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens), "
                    "sum(wall_s), sum(failed_calls) FROM stage_stats GROUP BY stage ORDER BY min(recorded_at)")}

    def cost_since(self, since) -> Cost:
        """The calls and tokens recorded at or after ``since`` (one process's share)."""
        calls, pt, ct = self.query("SELECT coalesce(sum(calls), 0), coalesce(sum(prompt_tokens), 0), "
                                   "coalesce(sum(completion_tokens), 0) FROM stage_stats WHERE recorded_at >= ?",
                                   [since])[0]
        return Cost(llm_calls=int(calls), prompt_tokens=int(pt), completion_tokens=int(ct))

    # -- reading back ----------------------------------------------------------------------------
    def evidence_for(self, claim_id: str) -> list[Evidence]:
        return self.evidence_for_many([claim_id]).get(claim_id, [])

    def evidence_for_many(self, claim_ids: list[str]) -> dict[str, list[Evidence]]:
        """Evidence of several claims in rank order, in one query."""
        out: dict[str, list[Evidence]] = {}
        if not claim_ids:
            return out
        for cid, source, s, e, score, text in self.query(
                "SELECT claim_id, source, start_char, end_char, score, text FROM evidence "
                "WHERE claim_id IN (SELECT unnest(?)) ORDER BY claim_id, rank", [claim_ids]):
            out.setdefault(cid, []).append(Evidence(text=text, source=source, start=s, end=e, score=score))
        return out

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
                "completion_tokens, cached_tokens, latency_s, p_factual, coalesce(capped, FALSE), repaired, "
                "coalesce(verifier, 'debate'), detail FROM turns ORDER BY claim_id, ordinal"):
            *fields, detail = turn
            chains.setdefault(cid, []).append(Turn(*fields, **Turn.detail_fields(json.loads(detail) if detail else None)))
        return {cid: Verdict(f, sev, conf, chains.get(cid, []), rounds, consensus, err, p_h, who)
                for cid, f, sev, conf, rounds, consensus, err, p_h, who in self.query(
                    "SELECT claim_id, factuality, error_severity, confidence, rounds, consensus, error, "
                    "p_hallucinated, coalesce(verifier, 'debate') FROM verdicts")}


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)
