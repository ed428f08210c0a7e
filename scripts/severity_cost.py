"""What a severity grade costs and gives, two ways, on the same verdicts and model (one run each, same process):

- ``call``: one short constrained call (``severity.grade``; prompts/severity.yaml ``system`` / ``user``, the deciding
  chunk shown again), as the judges grade;
- ``pass``: the next question in the deciding pass's own conversation, read from the digits' logits
  (``severity.grade_after_pass``; the pass's KV reused), as ``direct`` and ``probe`` grade.

Prints, for the claims ``direct`` flags: prompt tokens computed and reused, generated tokens and seconds per grade,
each way's histogram of grades, and how often they agree (exactly, within one). There are no severity labels in
the repository's data, so this measures cost and agreement, not which grade is right.

    python scripts/severity_cost.py --data corpora/demo/pairs.jsonl -p cpu-1.5b
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="an eval --data file (question, answer, context, label)")
    ap.add_argument("-p", "--profile", default="cpu-1.5b")
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()

    from halucheck.config import Settings, VerifierOptions
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.userdata import load_user_data
    from halucheck.evaluation.verifiers import case_of
    from halucheck.records import Cost
    from halucheck.verifiers import severity
    from halucheck.verifiers.probe.verifier import Direct

    cases = [case_of(item) for item in load_user_data(args.data, args.limit).items]
    timed = {"pass": 0.0}
    after_pass = severity.grade_after_pass

    def grade_after_pass(checks, verdicts, extractor, cost, prompt_of):
        before = (extractor.computed_tokens, extractor.reused_tokens, extractor.passes)
        t0 = time.perf_counter()
        after_pass(checks, verdicts, extractor, cost, prompt_of)
        timed["pass"] += time.perf_counter() - t0
        for k, (now, then) in zip(("computed", "reused", "grades"),
                                  zip((extractor.computed_tokens, extractor.reused_tokens, extractor.passes), before)):
            timed[k] = timed.get(k, 0) + now - then

    severity.grade_after_pass = grade_after_pass
    store = Path(tempfile.mkdtemp()) / "features.sqlite"  # the second verify reads the first's passes
    with EnginePool(Settings.load(profile=args.profile)) as engines:
        graded = Direct(VerifierOptions(features=str(store))).verify(cases, engines)
        flagged = [i for i, v in enumerate(graded) if v.factuality is False]
        # the same verdicts (their grades taken off), graded by a call with the deciding chunk
        verdicts = Direct(VerifierOptions(features=str(store), grade=False)).verify(cases, engines)
        assert [v.factuality for v in verdicts] == [v.factuality for v in graded]
        cost = Cost()
        t0 = time.perf_counter()
        severity.grade(cases, verdicts, engines, cost, lambda i, v: (v.chain[0].chunk or {}).get("text", ""), "direct")
        call_s = time.perf_counter() - t0
    by_pass = [graded[i].error_severity for i in flagged]
    by_call = [verdicts[i].error_severity for i in flagged]
    n = max(1, len(flagged))
    pairs = [(a, b) for a, b in zip(by_pass, by_call) if a is not None and b is not None]
    out = {
        "items": len(cases), "flagged": len(flagged),
        "call": {"computed_tokens_per_grade": round((cost.prompt_tokens - cost.cached_tokens) / n, 1),
                 "reused_tokens_per_grade": round(cost.cached_tokens / n, 1),
                 "generated_tokens_per_grade": round(cost.completion_tokens / n, 1),
                 "s_per_grade": round(call_s / n, 2), "grades": dict(sorted(Counter(by_call).items(), key=str))},
        "pass": {"computed_tokens_per_grade": round(timed.get("computed", 0) / n, 1),
                 "reused_tokens_per_grade": round(timed.get("reused", 0) / n, 1),
                 "generated_tokens_per_grade": 0.0,
                 "s_per_grade": round(timed["pass"] / n, 2), "grades": dict(sorted(Counter(by_pass).items(), key=str))},
        "agree_exactly": round(sum(a == b for a, b in pairs) / max(1, len(pairs)), 3),
        "agree_within_1": round(sum(abs(a - b) <= 1 for a, b in pairs) / max(1, len(pairs)), 3),
        "graded_both_ways": len(pairs),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
