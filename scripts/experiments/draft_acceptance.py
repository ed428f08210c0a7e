#!/usr/bin/env python
"""How many decode steps speculative decoding with n-gram drafts would save, replayed on real replies.

Reads the replies an eval or run cached with their tokens (``llm_cache.logprobs``: the token pieces the
model chose) and replays them in the order they were cached. Per reply tag (one reply schema: a debate
role, a baseline), a table learned from the earlier replies of that tag maps the last ``--n`` tokens to
the tokens that followed them; at each position the drafter follows the table's likeliest next token for
up to ``K`` tokens, stopping at a context it saw fewer than ``--min-count`` times or whose likeliest
successor has a share below ``--min-share``. A verification pass accepts the drafted tokens that equal
the reply's own, plus the model's own next token (greedy decoding gives exactly the same reply).

Printed per K: decode passes per generated token (1.0 without drafts), drafted tokens per generated
token (extra rows the passes compute), the share of drafts accepted, and a modelled decode time ratio
with a step cost of ``--step-ms`` + ``--row-ms`` per token row at ``--rows`` requests decoding together
(defaults from ``scripts/bench_decode_step.py`` on the 1.5B, two cores: ~264 ms at 1 row, ~313 at 8,
~415 at 16). The model ignores the longer KV a rejected draft leaves behind; it is an upper bound.

    python scripts/experiments/draft_acceptance.py runs/eval/debate/replies.duckdb
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

END = "<end>"


def replies(path: Path) -> list[tuple[str, list[str]]]:
    """(tag, token pieces + an end marker) of every cached reply that kept its tokens, in cache order."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as db:
        rows = db.execute("SELECT tag, logprobs FROM llm_cache WHERE logprobs IS NOT NULL ORDER BY rowid").fetchall()
    return [(tag or "", [piece for piece, _ in json.loads(lp)] + [END]) for tag, lp in rows]


def replay(data: list[tuple[str, list[str]]], k: int, n: int, min_count: int, min_share: float) -> dict:
    """Decode passes, drafted tokens and generated tokens over all replies, drafting up to ``k`` tokens."""
    tables: dict[str, dict[tuple, Counter]] = defaultdict(lambda: defaultdict(Counter))
    tokens = passes = drafted = 0
    for tag, toks in data:
        table = tables[tag]
        i = 0
        while i < len(toks):
            context, draft = list(toks[max(0, i - n) : i]), []
            while len(draft) < k:
                seen = table.get(tuple(context[-n:]))
                if not seen:
                    break
                token, count = seen.most_common(1)[0]
                if count < min_count or count / sum(seen.values()) < min_share:
                    break
                draft.append(token)
                context.append(token)
            accepted = 0
            while accepted < len(draft) and i + accepted < len(toks) and draft[accepted] == toks[i + accepted]:
                accepted += 1
            i += accepted + 1  # the accepted drafts and the model's own next token
            passes += 1
            drafted += len(draft)
        for j, token in enumerate(toks):  # learn from the whole reply once it is done
            table[tuple(toks[max(0, j - n) : j])][token] += 1
        tokens += len(toks)
    return {"tokens": tokens, "passes": passes, "drafted": drafted}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache", type=Path, help="a replies.duckdb (eval) or run.duckdb (run) with cached replies")
    ap.add_argument("--k", type=int, nargs="+", default=[2, 4, 8], help="most tokens drafted per pass")
    ap.add_argument("--n", type=int, default=2, help="tokens of context the table is keyed on")
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--min-share", type=float, default=0.6)
    ap.add_argument("--rows", type=int, default=6, help="requests decoding together")
    ap.add_argument("--step-ms", type=float, default=250.0)
    ap.add_argument("--row-ms", type=float, default=15.0)
    args = ap.parse_args(argv)
    if not args.cache.is_file():
        print(f"error: {args.cache}: no such file; give the replies.duckdb of an eval run", file=sys.stderr)
        return 2
    data = replies(args.cache)
    if not data:
        print(f"error: {args.cache}: no cached reply kept its tokens (cached before logprobs were stored?)",
              file=sys.stderr)
        return 2
    print(f"{len(data)} replies, {len({t for t, _ in data})} tags, {sum(len(t) for _, t in data)} tokens")
    out = {"replies": len(data), "n": args.n, "min_count": args.min_count, "min_share": args.min_share, "by_k": {}}
    for k in args.k:
        r = replay(data, k, args.n, args.min_count, args.min_share)
        t, p, d = r["tokens"], r["passes"], r["drafted"]
        base = t / args.rows * args.step_ms + t * args.row_ms
        spec = p / args.rows * args.step_ms + (p + d) * args.row_ms
        r.update(passes_per_token=round(p / t, 3), drafted_per_token=round(d / t, 3),
                 accepted_share=round((t - p) / d, 3) if d else None, modelled_time_ratio=round(spec / base, 3))
        out["by_k"][k] = r
        print(f"K={k}: {r['passes_per_token']} passes per token, {r['drafted_per_token']} drafted per token, "
              f"{r['accepted_share']} of drafts accepted, modelled decode time x{r['modelled_time_ratio']}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
