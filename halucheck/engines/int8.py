"""int8 weights for the embedded engine on a CPU (``dtype: int8`` in models.yaml).

Every linear layer keeps its weight as int8 with one scale per output row (symmetric: the row's largest
magnitude maps to 127), a quarter of float32's bytes. A decode step at a few rows reads every weight once
and is bound by memory, so the weight's bytes set its time. Up to :data:`WEIGHT_ROWS` rows, two kinds of
layer, both on torch's own kernels (vectorised for AVX2, AVX-512 and Arm):

- **int8 x int8** (:data:`DYNAMIC`, the attention's projections and the MLP's gate and up projections): each
  row of the input is quantised to int8 as it comes, in groups of :data:`GROUP` inputs with a scale apiece
  (symmetric), each group multiplied by ``torch._int_mm`` into int32 and scaled back: the layout torchao
  calls int8 dynamic activation, int8 weight, with grouped activation scales, which keep the few large
  activations of a row from flattening the rest. The weight is the kernel's first operand: on a CPU without
  AVX-512 VNNI the kernel is exact only when its second operand stays within 64, so there the inputs get 7
  bits (:func:`input_levels`, probed once). Measured on 2 AVX2 cores (AVX2 forced on an AVX-512 CPU), a
  1536 x 8960 layer at 8 rows: 3.4 ms against float32's 9.9 ms; 6.2 against 16.2 at 32 rows.
- **int8 weight only** (the MLP's down projection, whose input holds the model's few very large activations,
  and the output head): bfloat16 input times int8 weight, ``torch._weight_int8pack_mm`` (its float32
  input path is unvectorised: 175 ms against 5.9 ms for bfloat16 at 8 rows of the 1.5B's down projection).

Where this CPU's ``_int_mm`` is the slower of the two kernels (:func:`int_mm_faster`, probed at load: so on an
AVX2-only Zen 3 EPYC, where it ran 18x slower than the weight-only kernel), every layer is int8 weight only.

Above :data:`WEIGHT_ROWS` rows (a prompt pass, bound by arithmetic rather than memory) every layer's weight
is widened (bfloat16 where the CPU multiplies it natively, else float32) for that one matmul, into a reused
buffer: int8 inputs would cost accuracy there and save no time.

Accuracy on Qwen2.5-Coder-0.5B, teacher-forced over two texts of 384 tokens against float32 (top-1
next-token agreement, mean KL), on AVX-512 / with AVX2 forced: prompt passes 0.986 / 0.983, KL 0.0014 /
0.0015; the int8 kernels at every row, as a decode step runs them, 0.982 / 0.977, KL 0.0020 / 0.0029
(before the 7-bit inputs, AVX2's kernel saturated: 0.970, KL 0.0060). Earlier, over three texts: bfloat16
weights 0.974, KL 0.0010; one activation scale per row instead of per group 0.968, KL 0.0177; fbgemm's
dynamic int8 (one scale per tensor) 0.675. The rest of the model (embeddings, norms, attention) runs in
bfloat16 around it. Prompt-pass time, 0.5B, 384 tokens, one thread: with AVX2 forced 9.2 s against
float32's 7.9 s; on AVX-512 5.1 s against 7.8 s.
"""

from __future__ import annotations

import functools
import json
import struct
import threading
from pathlib import Path

import torch
from torch import nn

WEIGHT_ONLY = ("down_proj", "lm_head", "fc2", "c_proj", "w2")  # layers whose input holds outlier activations
GROUP = 128  # inputs quantised together in an int8 x int8 layer (each row's groups have their own scales)
WEIGHT_ROWS = 128  # rows up to which a layer runs its int8 kernel; above (a prompt pass), its weight is widened
DYNAMIC, WEIGHT = "int8 x int8", "int8 weight only"
QUANTIZE_ROWS = 4096  # weight rows quantised at a time when a layer is converted
SCRATCH_MAX = 64 * 2**20  # weights up to this many numbers are widened into a reused buffer (not the output head)
_local = threading.local()


def _scratch(n: int, dtype: torch.dtype) -> torch.Tensor:
    """This thread's reused buffer of at least ``n`` numbers of ``dtype``."""
    buf = getattr(_local, "buffers", {}).get(dtype)
    if buf is None or buf.numel() < n:
        with torch.inference_mode(False):  # a normal tensor: written in place both in and out of inference mode
            buf = torch.empty(n, dtype=dtype)
        _local.buffers = {**getattr(_local, "buffers", {}), dtype: buf}
    return buf


class Int8Linear(nn.Module):
    """A linear layer whose weight is int8 with a scale per output row (see the module)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, mode: str = DYNAMIC,
                 wide: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.mode, self.wide = mode, wide
        # a few thousand rows at a time: the float copies of a whole output head (the 1.5B's: 0.9 GB apiece)
        # would set the engine's peak memory
        q = torch.empty(weight.shape, dtype=torch.int8)
        scale = torch.empty(self.out_features)
        with torch.no_grad():
            for i in range(0, self.out_features, QUANTIZE_ROWS):
                rows = weight[i:i + QUANTIZE_ROWS].detach()
                # in this thread's float32 buffer, every step in place: a model's worth of fresh 25 MB blocks
                # cost a fault per page each (see engines.loading.returned_to_the_system)
                w = _scratch(rows.numel(), torch.float32)[:rows.numel()].view(rows.shape).copy_(rows)
                s = torch.maximum(w.amax(dim=1), w.amin(dim=1).neg()).clamp_(min=1e-8).div_(127.0)
                scale[i:i + QUANTIZE_ROWS] = s
                q[i:i + QUANTIZE_ROWS] = w.div_(s[:, None]).round_().clamp_(-127, 127)
        self.group = GROUP if self.in_features % GROUP == 0 else self.in_features
        if mode == DYNAMIC:  # one (out, group) block per group of inputs, each contiguous: _int_mm's fast layout
            q = q.reshape(self.out_features, -1, self.group).transpose(0, 1)
        self.register_buffer("qweight", q.contiguous())
        self.register_buffer("scales", scale if mode == DYNAMIC else scale.to(torch.bfloat16))
        self.register_buffer("bias", None if bias is None else bias.detach().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, self.in_features)
        if rows.shape[0] > WEIGHT_ROWS:  # a prompt pass, bound by arithmetic: the weight widened for one matmul
            out = (rows.to(self.wide) @ self._widened().t()).float()
        elif self.mode == DYNAMIC:
            # each row's inputs in groups, each group to int8 with its own scale; the weight is _int_mm's first
            # operand (exact at full range everywhere), the inputs its second (see input_levels)
            levels = input_levels()
            groups = rows.float().reshape(rows.shape[0], -1, self.group)
            scale = groups.abs().amax(dim=2).clamp(min=1e-8) / levels  # (rows, groups)
            q = torch.round(groups / scale[:, :, None]).clamp(-levels, levels).to(torch.int8)
            q = q.permute(1, 2, 0).contiguous()  # (groups, group, rows)
            out = torch._int_mm(self.qweight[0], q[0]).float() * scale[:, 0]
            for j in range(1, q.shape[0]):
                out += torch._int_mm(self.qweight[j], q[j]).float() * scale[:, j]
            out = out.t() * self.scales
        else:
            out = torch._weight_int8pack_mm(rows.to(torch.bfloat16).contiguous(), self.qweight, self.scales).float()
        if self.bias is not None:
            out = out + self.bias
        return out.to(x.dtype).reshape(*shape[:-1], self.out_features)

    def _widened(self) -> torch.Tensor:
        """The weight as an (out, in) matrix of :attr:`wide` numbers, written into this thread's scratch buffer
        (a fresh allocation of the 1.5B's MLP weight cost ~110 ms on AVX2 for its page faults; the copy into
        memory already mapped costs a tenth of that). Valid until the next layer's call."""
        n = self.qweight.numel()
        buf = _scratch(n, self.wide) if n <= SCRATCH_MAX else torch.empty(n, dtype=self.wide)
        w = buf[:n].view(self.out_features, self.in_features)
        if self.mode == DYNAMIC:  # stored as (groups, out, group)
            w.view(self.out_features, -1, self.group).copy_(self.qweight.transpose(0, 1))
        else:
            w.copy_(self.qweight)
        return w.mul_(self.scales.to(self.wide)[:, None])

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.mode}"


def quantize(model: nn.Module, wide: torch.dtype = torch.float32) -> dict[str, int]:
    """Replace every ``nn.Linear`` of ``model`` in place by an :class:`Int8Linear` (weight only where its name
    ends in one of :data:`WEIGHT_ONLY`); returns how many of each kind. A weight shared with the input
    embeddings (a tied output head) is copied: the embeddings keep theirs.

    The weights left as they were (embeddings, norms) are copied too: loaded from a safetensors file they are
    views of its memory map, which stays resident, every page the conversion read, as long as one view lives
    (measured, the 0.5B with AVX2 kernels: 2.08 GB resident after loading as int8, 1.24 GB with the copies)."""
    counts = _to_int8(model, wide, lambda full, child: (child.weight, child.bias))
    with torch.no_grad():
        for param in model.parameters():
            param.data = param.data.clone()
    return counts


def _to_int8(model: nn.Module, wide: torch.dtype, weights) -> dict[str, int]:
    """Replace every ``nn.Linear`` of ``model`` by an :class:`Int8Linear` of ``weights(full name, layer)`` (its
    weight and bias); how many of each kind."""
    counts = {DYNAMIC: 0, WEIGHT: 0}
    dynamic = int_mm_faster()
    for prefix, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                mode = WEIGHT if name in WEIGHT_ONLY or not dynamic else DYNAMIC
                weight, bias = weights(f"{prefix}.{name}" if prefix else name, child)
                setattr(parent, name, Int8Linear(weight, bias, mode, wide))
                counts[mode] += 1
    # the conversion's float32 buffer (one chunk of the widest layer): a prompt pass makes its own in the thread
    # that runs it, so this one would only be kept
    getattr(_local, "buffers", {}).pop(torch.float32, None)
    return counts


# safetensors' dtype names -> torch's
_SAFETENSORS_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
                       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                       "BOOL": torch.bool}


class _Tensors:
    """The tensors of a model folder's safetensors files (one file or an index of shards), each read on its own
    with plain file reads into memory of its own. Not memory-mapped: a mapped file's pages count as the process's
    resident memory, every page read, for as long as it is mapped."""

    def __init__(self, folder: Path) -> None:
        index = folder / "model.safetensors.index.json"
        files = sorted({folder / f for f in json.loads(index.read_text("utf-8"))["weight_map"].values()}) \
            if index.exists() else [folder / "model.safetensors"]
        self.where: dict[str, tuple[Path, int, dict]] = {}
        for f in files:
            with open(f, "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(n))
            header.pop("__metadata__", None)
            self.where.update({name: (f, 8 + n, meta) for name, meta in header.items()})

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def read(self, name: str) -> torch.Tensor:
        f, base, meta = self.where[name]
        start, end = meta["data_offsets"]
        buf = bytearray(end - start)
        with open(f, "rb") as fh:
            fh.seek(base + start)
            fh.readinto(buf)
        dtype = _SAFETENSORS_DTYPES[meta["dtype"]]
        return (torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)).reshape(meta["shape"])


def load(folder: Path, wide: torch.dtype, **kwargs) -> tuple[nn.Module, dict[str, int]] | None:
    """The causal LM in ``folder`` with :class:`Int8Linear` layers (see :func:`quantize`) and its other weights in
    bfloat16, built without ever holding the whole model in bfloat16: the model is made without weights, then
    each tensor is read from the safetensors file and converted on its own, so the peak is the int8 model and one
    tensor (the 1.5B: its bfloat16 file is 3.1 GB). ``kwargs`` go to ``from_config`` (``attn_implementation``).
    None where a weight the model needs is not in the files under its module's name (a checkpoint that
    ``from_pretrained`` renames as it loads): the caller then loads it whole and calls :func:`quantize`."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    if not (folder / "model.safetensors").exists() and not (folder / "model.safetensors.index.json").exists():
        return None
    tensors = _Tensors(folder)
    config = AutoConfig.from_pretrained(folder)
    with init_empty_weights(include_buffers=False):  # parameters without memory; buffers (rotary tables) real
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, **kwargs)
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    if getattr(config.get_text_config(), "tie_word_embeddings", False) and emb is not None and head is not None:
        head.weight = emb.weight  # a tied output head is the input embeddings' weight, as from_pretrained leaves it
    # each weight by every name it has (a tied output head is the input embeddings' weight under a second name)
    # -> the name it is stored under
    stored: dict[str, str] = {}
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    for aliases in names.values():
        found = next((n for n in aliases if n in tensors), None)
        if found is None:
            return None
        stored.update({n: found for n in aliases})
    if (folder / "generation_config.json").exists():
        model.generation_config = GenerationConfig.from_pretrained(folder)

    def read(name: str) -> torch.Tensor:
        return tensors.read(stored.get(name, name))

    with torch.no_grad():
        counts = _to_int8(model, wide, lambda full, child: (
            read(f"{full}.weight"), read(f"{full}.bias") if child.bias is not None else None))
        for full, param in list(model.named_parameters()):
            if param.is_meta:
                owner, _, attr = full.rpartition(".")
                module = model.get_submodule(owner)
                setattr(module, attr, nn.Parameter(read(full).to(torch.bfloat16), requires_grad=False))
    return model.eval(), counts


@functools.cache
def input_levels() -> int:
    """The int8 levels (each side of zero) an input may use in an int8 x int8 layer: 127 where this CPU's
    ``torch._int_mm`` is exact at full range, else 63.

    Why: on a CPU without AVX-512 VNNI, the AVX2 kernel multiplies unsigned by signed bytes and adds pairs
    into 16 bits, which saturate when the second operand's bytes reach past 64 (measured: errors up to 84,427
    on random full-range int8; none with the second operand within 64). The first operand is exact at full
    range, so the weight goes first and keeps all 8 bits, and the input (quantised per group as it comes) is
    held to 7 where the probe finds the kernel inexact."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-127, 128, (8, 128), dtype=torch.int8, generator=g)
    b = torch.randint(-127, 128, (128, 64), dtype=torch.int8, generator=g)
    exact = torch.equal(torch._int_mm(a, b).long(), (a.double() @ b.double()).long())
    return 127 if exact else 63


@functools.cache
def int_mm_faster() -> bool:
    """Whether this CPU's int8 x int8 kernel (``torch._int_mm``) multiplies a decode step's rows by an MLP-sized
    weight faster than its int8-weight kernel (``torch._weight_int8pack_mm``, bfloat16 inputs); where it does
    not, every layer is int8 weight only (:func:`quantize`). Probed once, the best of three calls each.

    Why: on an AVX2-only EPYC (Zen 3, 2 cores) ``_int_mm`` ran far from its speed elsewhere: a 1536 x 8960
    layer at 8 rows took 149 ms against 8.2 ms weight only and 27.6 ms in float32 (the whole decode step 5.5x
    float32's), while on an AVX-512 EPYC with AVX2 kernels forced it had taken 3.4 ms."""
    import time

    g = torch.Generator().manual_seed(0)
    w = torch.randint(-127, 128, (2048, 1024), dtype=torch.int8, generator=g)
    x = torch.randint(-63, 64, (1024, 8), dtype=torch.int8, generator=g)
    xb, scales = torch.randn(8, 1024, generator=g).to(torch.bfloat16), torch.ones(2048, dtype=torch.bfloat16)

    def best(call) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        return min(times)

    return best(lambda: torch._int_mm(w, x)) < best(lambda: torch._weight_int8pack_mm(xb, w, scales))


def available() -> str | None:
    """None when this torch runs both int8 kernels, else why not (the profile then needs another dtype)."""
    try:
        torch._int_mm(torch.zeros(1, 32, dtype=torch.int8), torch.zeros(32, 8, dtype=torch.int8))
        torch._weight_int8pack_mm(torch.zeros(1, 32, dtype=torch.bfloat16), torch.zeros(8, 32, dtype=torch.int8),
                                  torch.ones(8, dtype=torch.bfloat16))
    except (AttributeError, RuntimeError) as exc:
        return f"torch {torch.__version__} cannot run its int8 kernels here ({exc}); use dtype bfloat16 or float32"
    return None
