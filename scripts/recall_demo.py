"""Retrieval recall on the demo corpus with the query stage's search queries, against another query prompt.

For every demo answer, the query stage writes its search queries (plus the answer itself, as in
`halucheck run`); their hits are fused as in the run's evidence stage, and the answer counts as found at k
when one of the top-k passages holds a passage that states or contradicts its fact
(corpora/demo/gold.jsonl, by exact substring, whitespace normalised).

    python scripts/recall_demo.py --profile vllm-1.5b --baseline-prompt OLD_claims.yaml

prints a JSON line: recall@k for the answer alone, the current query prompt and (with --baseline-prompt, a
claims.yaml whose `queries.system` is the prompt to compare) the baseline prompt, and every query written.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def norm(text: str) -> str:
    return " ".join(text.split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=None, help="models.yaml profile for the query role")
    ap.add_argument("--baseline-prompt", type=Path, help="a claims.yaml whose queries.system prompt to compare")
    ap.add_argument("--k", default="1,3,10", help="cut-offs (default 1,3,10)")
    args = ap.parse_args()

    import yaml

    from halucheck import claims as stages
    from halucheck import retrieval
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.engines.base import Request
    from halucheck.evidence import fuse
    from halucheck.prompts import load as load_prompts

    demo = REPO / "corpora" / "demo"
    answers = [json.loads(l) for l in (demo / "answers.jsonl").read_text().splitlines() if l.strip()]
    gold = {g["id"]: [norm(s) for s in g["passage_contains"]]
            for g in map(json.loads, (demo / "gold.jsonl").read_text().splitlines())}
    ks = [int(k) for k in args.k.split(",")]
    settings = Settings.load(profile=args.profile)
    engines = EnginePool(settings)
    engine = engines.engine_for("query")
    sampling = settings.sampling("query", stages.QUERY_SAMPLING)
    statements = [a["answer"] for a in answers]

    def queries_with(system: str | None) -> list[list[str]]:
        if system is None:  # the shipped prompt, through the stage itself
            return [o.value for o in stages.make_queries(engine, statements, sampling)]
        user = load_prompts("claims")["queries"]["user"]
        reqs = [Request(({"role": "system", "content": system}, {"role": "user", "content": user.render(claim=s)}),
                        schema=stages.QUERIES_SCHEMA, sampling=sampling, tag="claims:queries")
                for s in statements]
        return [list(dict.fromkeys([q.strip() for q in (r.parsed or {}).get("queries", []) if q.strip()] + [s]))
                for r, s in zip(engine.generate(reqs), statements)]

    runs = {"answer alone": [[s] for s in statements], "queries (current prompt)": queries_with(None)}
    if args.baseline_prompt:
        old = yaml.safe_load(args.baseline_prompt.read_text())["queries"]["system"]
        runs["queries (baseline prompt)"] = queries_with(old)
    with tempfile.TemporaryDirectory() as tmp:
        retrieval.build_index(demo / "docs", Path(tmp) / "index.duckdb", warn=lambda m: None)
        index = retrieval.Index.open(Path(tmp) / "index.duckdb")
        out = {"answers": len(answers)}
        for name, qs in runs.items():
            recall = {}
            for k in ks:
                found = 0
                for a, q in zip(answers, qs):
                    hits = fuse(index.search_many(q, k=max(ks)), k)
                    found += any(g in norm(h.text) for h in hits for g in gold[a["id"]])
                recall[f"recall@{k}"] = round(found / len(answers), 3)
            out[name] = recall
        out["queries"] = {a["id"]: {n: qs[i] for n, qs in runs.items() if n != "answer alone"}
                          for i, a in enumerate(answers)}
        index.close() if hasattr(index, "close") else None
    engines.close()
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
