"""Device selection (privssl.io.pick_device) and the CUDA path's shared code: on the CPU the
selection logic, on a GPU (pytest -m cuda, benchmarks/gpu/check.sh) that CUDA results come back to
the CPU and agree with the CPU's."""

import pytest
import torch

from privssl.io import InputError, pick_device
from privssl.training.encoders import build_encoder, encode
from privssl.training.precision import arithmetic, autocast, channels_last

@pytest.fixture
def cudnn_flags():
    """Restore cuDNN's global flags, which pick_device sets."""
    saved = torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic
    yield
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved


def test_auto_and_cpu_pick_the_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == torch.device("cpu")
    assert pick_device("cpu") == torch.device("cpu")


def test_auto_picks_cuda_when_present_and_makes_cudnn_deterministic(monkeypatch, cudnn_flags):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = True, False
    assert pick_device("auto") == torch.device("cuda")
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic) == (False, True)


def test_cpu_is_kept_when_cuda_is_present(monkeypatch, cudnn_flags):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device("cpu") == torch.device("cpu")


def test_cuda_without_a_device_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="device 'cuda' was asked for, but torch sees no CUDA device"):
        pick_device("cuda")


def test_an_unknown_device_is_refused_with_the_allowed_ones():
    with pytest.raises(InputError, match=r"device 'gpu' is not allowed; allowed: auto, cpu, cuda"):
        pick_device("gpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["convnet", "resnet18"])
def test_encode_on_cuda_returns_cpu_features_close_to_the_cpus(name):
    torch.manual_seed(0)
    encoder = build_encoder(name, 3, 32, 16)
    images = torch.randint(0, 256, (40, 3, 32, 32), dtype=torch.uint8)
    on_cpu = encode(encoder, images, torch.device("cpu"), batch_size=16)
    on_gpu = encode(encoder.to(pick_device("cuda")), images, torch.device("cuda"), batch_size=16)
    assert on_gpu.device.type == "cpu"
    # cuDNN convolves in TF32 on Ampere and later GPUs (torch's default): 10-bit mantissas; a
    # network left in training mode or fed the wrong images differs by far more
    torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-2, atol=1e-3)


def test_mixed_precision_is_off_on_the_cpu():
    """CPU results must not move: no autocast, no change of layout."""
    cpu = torch.device("cpu")
    layer = torch.nn.Conv2d(3, 4, 3)
    x = torch.rand(2, 3, 8, 8)
    assert channels_last(layer, cpu) is layer and channels_last(x, cpu) is x
    with autocast(cpu):
        assert layer(x).dtype == torch.float32


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mixed_precision_on_cuda_is_bf16_in_channels_last():
    gpu = torch.device("cuda")
    layer = channels_last(torch.nn.Conv2d(3, 4, 3).to(gpu), gpu)
    x = channels_last(torch.rand(2, 3, 8, 8, device=gpu), gpu)
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert layer.weight.is_contiguous(memory_format=torch.channels_last)
    with autocast(gpu):
        assert layer(x).dtype == torch.bfloat16


def test_a_checkpoint_fingerprint_tells_mixed_precision_apart_and_leaves_cpu_ones_valid():
    """CPU fingerprints keep the device kind they always had (existing checkpoints stay valid);
    a CUDA one names the mixed precision, so a GPU checkpoint written without it is not resumed."""
    assert arithmetic(torch.device("cpu")) == "cpu"
    assert arithmetic(torch.device("cuda")) not in ("cpu", "cuda")
