#!/usr/bin/env python
"""Decode-step cost of the embedded engine, and its attention for one query token vs torch's sdpa.

1. The model's decode step (one token per row, KV of ``--prompt`` tokens per row, prompts computed in
   passes of 8 rows and joined, as the engine does) at 1, 8, 16 and 32 rows: the median of 10 steps, with
   the KV in transformers' DynamicLayer and in the engine's DecodeLayer (steps interleaved, same load).
2. One layer's attention for one query token at ``--rows`` rows (the 1.5B's shape: 12 query heads, 2
   key/value heads, head size 128, bfloat16 tensors, 50 padded positions per row): torch's sdpa (the
   kernel transformers' sdpa path calls) vs the engine's ``_attention``, each the mean of 20 calls, and
   each one's largest error against a float32 reference.

    OMP_WAIT_POLICY=PASSIVE python scripts/bench_decode_step.py --model qwen2.5-coder-1.5b-instruct

3. ``--dtypes float32,bfloat16,int8``: instead, the decode step (DecodeLayer) with the weights in each dtype,
   each in a process of its own (so each peak RSS is its own), and each dtype's step time over the first's.
   On a CPU with AVX-512, ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2``
   makes torch use its AVX2 kernels, as an AVX2-only CPU would (``dtype: bfloat16`` then has no fast kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def step_times(model: str, prompt: int, rows_list: list[int], dtype: str | None = None) -> dict[int, dict[str, float]]:
    """Per row count, the median decode step with the KV in transformers' DynamicLayer (bfloat16, a copy of
    the cache per step) and in the engine's DecodeLayer (float32, written in place), steps interleaved."""
    import torch
    from transformers import DynamicCache

    from halucheck.engines import create_engine
    from halucheck.engines.decode_cache import DecodeLayer
    from halucheck.engines.batching import _cache_name, merge_passes

    engine = create_engine("transformers", model=model, dtype=dtype)
    out = {}
    for rows in rows_list:
        ids = torch.randint(100, 5000, (rows, prompt))
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            parts = []
            for i in range(0, rows, 8):
                o = engine._forward(ids[i:i + 8], mask[i:i + 8], mask[i:i + 8].cumsum(-1) - 1, None)
                parts.append((o.logits[:, -1].float(), getattr(o, _cache_name()), mask[i:i + 8]))
            _, dynamic, m = parts[0] if len(parts) == 1 else merge_passes(parts)
            decode = DynamicCache(ddp_cache_data=[(x.keys.clone(), x.values.clone()) for x in dynamic.layers])
            decode.layers = [DecodeLayer(x.keys, x.values) for x in decode.layers]
            caches = {"dynamic": [dynamic, m, []], "decode": [decode, m.clone(), []]}
            step = torch.randint(100, 5000, (rows, 1))
            for _ in range(12):
                for entry in caches.values():
                    cache, m, times = entry
                    entry[1] = m = torch.cat([m, m.new_ones((rows, 1))], 1)
                    t0 = time.perf_counter()
                    engine._forward(step, m, m.sum(-1, keepdim=True) - 1, cache)
                    times.append(time.perf_counter() - t0)
        out[rows] = {kind: statistics.median(times[2:]) * 1000 for kind, (_, _, times) in caches.items()}
        print(f"decode step, {rows:3d} rows: DynamicLayer {out[rows]['dynamic']:.0f} ms, "
              f"DecodeLayer {out[rows]['decode']:.0f} ms ({out[rows]['decode'] / rows:.0f} ms per row)", flush=True)
    return out


def attention_times(rows: int, length: int) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from halucheck.engines.attention import _attention

    class Layer(torch.nn.Module):
        num_key_value_groups = 6
        is_causal = True

    heads, kv_heads, dim = 12, 2, 128
    q = torch.randn(rows, heads, 1, dim, dtype=torch.bfloat16)
    k = torch.randn(rows, kv_heads, length, dim, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    mask = torch.ones(rows, 1, 1, length, dtype=torch.bool)
    mask[..., :50] = False

    def timed(f, n=20):
        f()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n * 1000

    ref = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(6, 1),
                                         v.float().repeat_interleave(6, 1), attn_mask=mask)
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # noqa: E731
    ours = lambda: _attention(Layer(), q, k, v, mask, scaling=dim**-0.5)[0]  # noqa: E731
    out = {"sdpa_ms": timed(sdpa), "ours_ms": timed(ours),
           "sdpa_err": (sdpa().float() - ref).abs().max().item(),
           "ours_err": (ours().transpose(1, 2).float() - ref).abs().max().item()}
    print(f"attention, one query token, {rows} rows x {length} keys: sdpa {out['sdpa_ms']:.1f} ms "
          f"(error {out['sdpa_err']:.1e}), ours {out['ours_ms']:.1f} ms (error {out['ours_err']:.1e})", flush=True)
    return out


def dtype_times(args) -> None:
    """Section 3: each dtype in a process of its own (``--dtype``), then the ratios to the first."""
    import subprocess

    dtypes = args.dtypes.split(",")
    runs = {}
    for dtype in dtypes:
        cmd = [sys.executable, __file__, "--model", args.model, "--prompt", str(args.prompt), "--rows", args.rows,
               "--dtype", dtype]
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
        runs[dtype] = json.loads(lines[-1])
        steps = ", ".join(f"{rows} rows {v['decode']:.0f} ms" for rows, v in runs[dtype]["step_ms"].items())
        print(f"{dtype:>9}: decode step {steps}; peak RSS {runs[dtype]['peak_rss_gib']:.2f} GiB", flush=True)
    first = dtypes[0]
    for dtype in dtypes[1:]:
        ratios = ", ".join(f"{rows} rows {v['decode'] / runs[first]['step_ms'][rows]['decode']:.2f}x"
                           for rows, v in runs[dtype]["step_ms"].items())
        print(f"{dtype} over {first}: {ratios}; peak RSS "
              f"{runs[dtype]['peak_rss_gib'] / runs[first]['peak_rss_gib']:.2f}x")
    print(json.dumps(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--prompt", type=int, default=1000, help="prompt tokens per row")
    ap.add_argument("--rows", default="1,8,16,32")
    ap.add_argument("--attention-rows", type=int, default=8)
    ap.add_argument("--dtypes", help="compare the decode step across these weight dtypes (section 3)")
    ap.add_argument("--dtype", help=argparse.SUPPRESS)  # one of them, in its own process
    args = ap.parse_args()
    if args.dtypes:
        return dtype_times(args)
    import torch

    torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    if args.dtype:
        import resource

        steps = step_times(args.model, args.prompt, [int(r) for r in args.rows.split(",")], args.dtype)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        print(json.dumps({"step_ms": {str(k): v for k, v in steps.items()}, "peak_rss_gib": peak}))
        return
    result = {"attention": attention_times(args.attention_rows, args.prompt)}
    steps = step_times(args.model, args.prompt, [int(r) for r in args.rows.split(",")])
    result["step_ms"] = {str(k): {kind: round(ms, 1) for kind, ms in v.items()} for k, v in steps.items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
