"""approximate() on a torchvision model replaces exactly the layers its
patterns name (the last matching rule wins, as --mul-layer), refuses what it
cannot run, and restore() gives the original outputs back."""
import copy
import io
import pickle

import pytest
import torch
from torch import nn
import torchvision

import mantis.torch as mt
from conftest import assert_bits, operands


def resnet(seed=0):
    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=10).eval()


def approx_names(model):
    return {n: type(m).__name__ for n, m in model.named_modules() if isinstance(m, (mt.Linear, mt.Conv2d))}


def test_patterns_replace_exactly_the_named_layers(asym, gen):
    model = resnet()
    x = operands(gen, 2, 3, 32, 32)
    with torch.no_grad():
        before = model(x)
    keys = list(model.state_dict())
    fc_w = model.fc.weight
    mt.approximate(model, layers={"layer1.*": asym, "layer1.1.conv2": "bf16", "fc": "mbm,acc=M7E4"})
    assert approx_names(model) == {"layer1.0.conv1": "Conv2d", "layer1.0.conv2": "Conv2d", "layer1.1.conv1": "Conv2d",
                                   "layer1.1.conv2": "Conv2d", "fc": "Linear"}
    assert model.layer1[1].conv2.multipliers["mul"].desc == "lut exact bf16"  # the last matching rule wins
    assert model.layer1[0].conv1.multipliers["mul"] is asym
    assert model.fc.multipliers["mul"].fmaq and not model.fc.multipliers["mul_bwd"].fmaq
    assert type(model.conv1) is nn.Conv2d and type(model.layer2[0].downsample[0]) is nn.Conv2d
    assert model.fc.weight is fc_w and list(model.state_dict()) == keys
    with torch.no_grad():
        during = model(x)
    assert not torch.equal(during, before)
    # the approximated layer computes what the functional form computes
    with torch.no_grad():
        h, z = model.layer1[0].conv1, operands(gen, 2, 64, 8, 8)
        assert_bits(h(z), mt.conv2d(z, h.weight, None, 1, 1, mul=asym), "layer1.0.conv1")
    mt.restore(model)
    assert approx_names(model) == {}
    with torch.no_grad():
        after = model(x)
    assert torch.equal(after, before)


def test_mul_everywhere_exclude_and_training_shared(gen):
    model = resnet().train()
    mt.approximate(model, mul="bf16", exclude=["conv1", "layer4"])
    names = approx_names(model)
    convs = [n for n, m in resnet().named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert set(names) == {n for n in convs if n != "conv1" and not n.startswith("layer4.")}
    # one optimizer step through the approximated model moves the originals' weights
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(operands(gen, 2, 3, 32, 32)).square().mean()
    loss.backward()
    w0 = model.fc.weight.detach().clone()
    opt.step()
    mt.restore(model)
    assert not torch.equal(model.fc.weight.detach(), w0) and type(model.fc) is nn.Linear


def test_copies_and_pickles(asym, gen):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    mt.approximate(model, mul=asym)
    x = operands(gen, 2, 3, 8, 8)
    y = model(x)
    assert_bits(copy.deepcopy(model)(x), y, "deepcopy")
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    assert_bits(torch.load(buf)(x), y, "torch.save / load")
    assert_bits(pickle.loads(pickle.dumps(model))(x), y, "pickle")


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.qk = mt.MatMul()
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        a, _ = self.attn(x, x, x)
        s = self.qk(a, a.transpose(1, 2)).softmax(-1)
        return self.head(s @ a)


def test_unsupported_layers_are_refused_not_left_exact(asym):
    model = Attention()
    with pytest.raises(TypeError) as e:
        mt.approximate(model, mul=asym)
    assert "'attn' (MultiheadAttention)" in str(e.value) and "\n" not in str(e.value)
    assert approx_names(model) == {} and model.qk.multipliers is None  # nothing changed
    mt.approximate(model, mul=asym, exclude=["attn"])
    assert set(approx_names(model)) == {"head"}  # not attn.out_proj: excluded with attn
    assert model.qk.multipliers["mul"] is asym
    mt.restore(model)
    assert model.qk.multipliers is None and type(model.head) is nn.Linear
    with pytest.raises(TypeError):
        mt.approximate(nn.Sequential(nn.Conv1d(2, 2, 3)), layers={"0": asym})
    pm = nn.Sequential(nn.Linear(3, 3))
    torch.nn.utils.parametrizations.orthogonal(pm[0])
    with pytest.raises(TypeError) as e:
        mt.approximate(pm, mul=asym)
    assert "'0'" in str(e.value)


def test_bad_patterns_are_one_line_errors(asym):
    model = resnet()
    with pytest.raises(ValueError) as e:
        mt.approximate(model, layers={"layer9.*": asym})
    assert "'layer9.*' names no" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError):
        mt.approximate(model)
    with pytest.raises(TypeError):
        mt.approximate(model, layers={"": asym})
    with pytest.raises(TypeError):
        mt.approximate(nn.Linear(2, 2), mul=asym)
    assert approx_names(model) == {}
