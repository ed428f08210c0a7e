"""int8 linear layers (halucheck/engines/int8.py) on random weights: close to the float layer on both kernels
and both row paths, biases kept, a tied output head copied so the embeddings keep their float weights."""

import pytest

torch = pytest.importorskip("torch")

from halucheck.engines import int8  # noqa: E402
from halucheck.engines.int8 import DYNAMIC, WEIGHT, Int8Linear, quantize  # noqa: E402

pytestmark = pytest.mark.skipif(int8.available() is not None, reason=str(int8.available()))


def relative_error(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("mode", [DYNAMIC, WEIGHT])
@pytest.mark.parametrize("rows", [1, 8, int8.WEIGHT_ROWS + 1])
def test_an_int8_layer_gives_the_float_layers_outputs_within_a_few_percent(mode, rows):
    torch.manual_seed(0)
    layer = torch.nn.Linear(384, 200, bias=True)
    x = torch.randn(rows, 384)
    x[:, 7] *= 30  # one large input channel, as real activations have
    q = Int8Linear(layer.weight, layer.bias, mode)
    with torch.inference_mode():
        out, ref = q(x), layer(x)
    assert out.shape == ref.shape and out.dtype == x.dtype
    assert relative_error(out, ref) < (0.03 if mode == DYNAMIC else 0.01)  # int8 inputs cost more
    assert q.qweight.dtype == torch.int8 and q.qweight.numel() == layer.weight.numel()
    # a bfloat16 input comes back in bfloat16, batched leading dimensions kept
    with torch.inference_mode():
        out3 = q(x.reshape(1, rows, 384).to(torch.bfloat16))
    assert out3.shape == (1, rows, 200) and out3.dtype == torch.bfloat16


def test_a_row_is_quantised_on_its_own_so_its_output_does_not_depend_on_the_others():
    torch.manual_seed(1)
    q = Int8Linear(torch.randn(64, 256), None, DYNAMIC)
    x = torch.randn(4, 256)
    with torch.inference_mode():
        alone = q(x[:1])
        x[1:] *= 1000  # other rows far larger
        together = q(x)[:1]
    assert torch.equal(alone, together)


def test_quantize_replaces_every_linear_and_copies_a_tied_head():
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 128)
            self.up_proj = torch.nn.Linear(128, 256)
            self.down_proj = torch.nn.Linear(256, 128)
            self.lm_head = torch.nn.Linear(128, 50, bias=False)
            self.lm_head.weight = self.embed.weight  # tied

    model = Tiny()
    before = model.embed.weight.detach().clone()
    assert quantize(model) == {DYNAMIC: 1, WEIGHT: 2}
    assert model.up_proj.mode == DYNAMIC and model.down_proj.mode == WEIGHT and model.lm_head.mode == WEIGHT
    assert model.embed.weight.dtype == torch.float32 and torch.equal(model.embed.weight, before)
    assert not [m for m in model.modules() if type(m) is torch.nn.Linear]
