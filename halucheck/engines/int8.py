"""int8 weights for the embedded engine on a CPU (``dtype: int8`` in models.yaml).

Every linear layer keeps its weight as int8 with one scale per output row (symmetric: the row's largest
magnitude maps to 127), a quarter of float32's bytes. A decode step at a few rows reads every weight once
and is bound by memory, so the weight's bytes set its time. Two kinds of layer, both on torch's own kernels
(vectorised for AVX2, AVX-512 and Arm):

- **int8 × int8** (:data:`DYNAMIC`, the attention's projections and the MLP's gate and up projections): each
  row of the input is quantised to int8 as it comes, in groups of :data:`GROUP` inputs with a scale apiece
  (symmetric), each group multiplied by ``torch._int_mm`` into int32 and scaled back: the layout torchao
  calls int8 dynamic activation, int8 weight, with grouped activation scales, which keep the few large
  activations of a row from flattening the rest. Measured on 2 AVX2 cores (AVX2 forced on an AVX-512 CPU),
  a 1536 × 8960 layer at 8 rows: 3.7 ms against float32's 8.6 ms (0.43 ×); 0.46 × at 16 rows, 0.57 × at 32.
- **int8 weight only** (the MLP's down projection, whose input holds the model's few very large activations,
  and the output head): bfloat16 input times int8 weight, ``torch._weight_int8pack_mm``; above
  :data:`WEIGHT_ROWS` rows (a prompt pass, bound by arithmetic rather than memory) the weight is widened for
  that one matmul instead.

Accuracy on Qwen2.5-Coder-0.5B, teacher-forced over three texts against float32 (top-1 next-token
agreement, mean KL): this mix 0.987, 0.0040; bfloat16 weights 0.974, 0.0010; int8 weights only everywhere
0.981, 0.0022 (but 0.6 × float32 at 8 rows); one activation scale per row instead of per group 0.968, 0.0177;
fbgemm's dynamic int8 (one scale per tensor) 0.675. The rest of the model (embeddings, norms, attention) runs
in bfloat16 around it.
"""

from __future__ import annotations

import torch
from torch import nn

WEIGHT_ONLY = ("down_proj", "lm_head", "fc2", "c_proj", "w2")  # layers whose input holds outlier activations
GROUP = 128  # inputs quantised together in an int8 x int8 layer (each row's groups have their own scales)
WEIGHT_ROWS = 128  # rows up to which a weight-only layer runs the int8 kernel; above, its weight is widened
DYNAMIC, WEIGHT = "int8 x int8", "int8 weight only"


class Int8Linear(nn.Module):
    """A linear layer whose weight is int8 with a scale per output row (see the module)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, mode: str = DYNAMIC,
                 wide: torch.dtype = torch.float32) -> None:
        super().__init__()
        w = weight.detach().float()
        scale = w.abs().amax(dim=1).clamp(min=1e-8) / 127.0
        q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
        self.in_features, self.out_features, self.mode, self.wide = w.shape[1], w.shape[0], mode, wide
        self.group = GROUP if self.in_features % GROUP == 0 else self.in_features
        if mode == DYNAMIC:  # one (out, group) block per group of inputs, each contiguous: _int_mm's fast layout
            q = q.reshape(self.out_features, -1, self.group).transpose(0, 1)
        self.register_buffer("qweight", q.contiguous())
        self.register_buffer("scales", scale if mode == DYNAMIC else scale.to(torch.bfloat16))
        self.register_buffer("bias", None if bias is None else bias.detach().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, self.in_features)
        if self.mode == DYNAMIC:
            groups = rows.float().reshape(rows.shape[0], -1, self.group)
            scale = groups.abs().amax(dim=2, keepdim=True).clamp(min=1e-8) / 127.0
            q = torch.round(groups / scale).clamp(-127, 127).to(torch.int8).transpose(0, 1).contiguous()
            out = torch._int_mm(q[0], self.qweight[0].t()).float() * scale[:, 0]
            for j in range(1, q.shape[0]):
                out += torch._int_mm(q[j], self.qweight[j].t()).float() * scale[:, j]
            out *= self.scales
        elif rows.shape[0] <= WEIGHT_ROWS:
            out = torch._weight_int8pack_mm(rows.to(torch.bfloat16).contiguous(), self.qweight, self.scales).float()
        else:
            weight = self.qweight.to(self.wide) * self.scales.to(self.wide)[:, None]
            out = (rows.to(self.wide) @ weight.t()).float()
        if self.bias is not None:
            out = out + self.bias
        return out.to(x.dtype).reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.mode}"


def quantize(model: nn.Module, wide: torch.dtype = torch.float32) -> dict[str, int]:
    """Replace every ``nn.Linear`` of ``model`` in place by an :class:`Int8Linear` (weight only where its name
    ends in one of :data:`WEIGHT_ONLY`); returns how many of each kind. A weight shared with the input
    embeddings (a tied output head) is copied: the embeddings keep theirs."""
    counts = {DYNAMIC: 0, WEIGHT: 0}
    for prefix, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                mode = WEIGHT if name in WEIGHT_ONLY else DYNAMIC
                setattr(parent, name, Int8Linear(child.weight, child.bias, mode, wide))
                counts[mode] += 1
    return counts


def available() -> str | None:
    """None when this torch runs both int8 kernels, else why not (the profile then needs another dtype)."""
    try:
        torch._int_mm(torch.zeros(1, 32, dtype=torch.int8), torch.zeros(32, 8, dtype=torch.int8))
        torch._weight_int8pack_mm(torch.zeros(1, 32, dtype=torch.bfloat16), torch.zeros(8, 32, dtype=torch.int8),
                                  torch.ones(8, dtype=torch.bfloat16))
    except (AttributeError, RuntimeError) as exc:
        return f"torch {torch.__version__} cannot run its int8 kernels here ({exc}); use dtype bfloat16 or float32"
    return None
