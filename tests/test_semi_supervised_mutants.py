"""Behaviour tests of privssl.training.semi_supervised against computations made here (issue 28):
the bugs a wrong verdict would rest on and the mutants (`make mutants`) the older tests let live.

- FlexMatch: the class thresholds τ·M(β), M(x) = x / (2 − x), replayed step by step from the
  records each step drew, through the warm-up (unused records dominate) to a class at τ itself, with
  FlexMatch's τ, not FixMatch's; a batch is masked by the thresholds before it and then counted.
- UDA: the target is softmax(logits / T) at the configured temperature (two of them).
- The masks at a confidence exactly at τ (≥, not >).
- Whole training runs on full batches without augmentation, where every step is known: SGD with
  Nesterov momentum and weight decay written out by hand, at lr η·cos(πk / 2N), the EMA of the
  weights, the history rows (means over the steps of a checkpoint), for every algorithm.
- DP-SGD: the Poisson batches at B / n_l and μB / n_u (recomputed from keyed_hash), each record's
  gradient scaled by λ_u / μ and clipped to C, the sum divided by B, noise σC / B, an empty batch.
- A resumed run (FlexMatch, DP-SGD) equal to an uninterrupted one, bit for bit.

Networks are linear (a few dozen weights), runs a few steps: the file takes a few seconds.
"""

from __future__ import annotations

import copy
import dataclasses
import fractions
import math
import pickle

import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn

from privssl.io import InputError
from privssl.training import semi_supervised, semi_supervised_private
from privssl.training.augment import AugmentSpec, keyed_hash, strong_keyed
from privssl.training.checkpoints import differing
from privssl.training.semi_supervised import (
    TrainingSet,
    TrainSpec,
    checkpoint_fingerprint,
    cosine_lr,
    flexmatch_thresholds,
    train,
    unlabelled_losses,
)
from privssl.training.semi_supervised_private import (
    PrivateSpec,
    poisson_rates,
    private_batch,
    sampling_rate,
    train_private,
)

torch.set_num_threads(1)

CPU = torch.device("cpu")
PLAIN = AugmentSpec(0, False, 0, 0)  # weak and strong views are the images themselves


def quiet(_message: str) -> None:
    pass


def flexmatch_m(beta: float) -> float:
    """FlexMatch's mapping M(β) = β / (2 − β)."""
    return beta / (2 - beta)


def softmax(row: list[float], temperature: float = 1.0) -> list[float]:
    exps = [math.exp(v / temperature) for v in row]
    return [e / sum(exps) for e in exps]


def spec(**changes) -> TrainSpec:
    fields = dict(steps=4, checkpoint_every=2, batch_size=4, unlabelled_ratio=2, lr=0.1, momentum=0.9,
                  weight_decay=5e-3, ema=0.5, thresholds={"fixmatch": 0.95, "flexmatch": 0.95, "uda": 0.8})
    return TrainSpec(**(fields | changes))


# ------------------------------------------------------------------------------ the unlabelled losses


def weak_strong(seed: int, n: int = 10, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return 3 * torch.randn(n, classes, generator=g), torch.randn(n, classes, generator=g)


def test_uda_target_is_the_weak_posterior_sharpened_at_the_configured_temperature():
    """softmax(logits / T) at T from the config (uda_temperature), for two T: a temperature
    ignored, or fixed at 0.4, fails one of them."""
    weak_logits, strong_logits = weak_strong(0)
    log_q = torch.log_softmax(strong_logits.double(), -1)
    losses = {}
    for temperature in (0.25, 0.9):
        cfg = {"steps": 1, "checkpoint_every": 1, "batch_size": 1, "unlabelled_ratio": 1, "lr": 0.1,
               "momentum": 0.0, "weight_decay": 0.0, "ema": 0.0, "thresholds": {"uda": 0.0},
               "uda_temperature": temperature, "not_a_field": 1}
        train_spec = TrainSpec.from_config(cfg)
        assert train_spec.uda_temperature == temperature
        loss, mask = unlabelled_losses("uda", weak_logits, strong_logits, train_spec)
        assert mask.all()  # τ = 0
        expected = [-sum(t * float(lq) for t, lq in zip(softmax(row, temperature), log_row))
                    for row, log_row in zip(weak_logits.tolist(), log_q)]
        assert loss.tolist() == pytest.approx(expected, rel=1e-5)
        losses[temperature] = loss
    assert not torch.allclose(losses[0.25], losses[0.9], rtol=1e-2)  # the temperature matters here


def test_trainspec_defaults_are_the_thesis_values():
    fields = dict(steps=1, checkpoint_every=1, batch_size=1, unlabelled_ratio=1, lr=0.1, momentum=0.0,
                  weight_decay=0.0, ema=0.0)
    train_spec = TrainSpec.from_config(fields)
    assert train_spec.uda_temperature == 0.4 and train_spec.unlabelled_weight == 1.0 and train_spec.thresholds == {}
    assert TrainSpec(**fields).checkpoints() == [1]
    assert spec(steps=10, checkpoint_every=3).checkpoints() == [3, 6, 9]
    assert spec(steps=9, checkpoint_every=3).checkpoints() == [3, 6, 9]  # N itself when a multiple


@pytest.mark.parametrize("algorithm", ["fixmatch", "uda"])
def test_the_mask_holds_a_confidence_exactly_at_tau(algorithm):
    weak_logits, strong_logits = weak_strong(1)
    confidence = torch.softmax(weak_logits.double(), -1).max(-1).values
    tau = float(confidence[3])  # row 3 sits on τ, bit for bit
    _, mask = unlabelled_losses(algorithm, weak_logits, strong_logits, spec(thresholds={algorithm: tau}))
    assert bool(mask[3])
    assert mask.tolist() == [float(c) >= tau for c in confidence]
    assert 0 < int(mask.sum()) < len(mask)


def test_flexmatch_masks_a_confidence_exactly_at_its_class_threshold():
    weak_logits, strong_logits = weak_strong(2)
    probs = torch.softmax(weak_logits.double(), -1)
    confidence, pseudo = probs.max(-1)
    thresholds = torch.full((4,), 2.0, dtype=torch.float64)  # nothing passes ...
    thresholds[pseudo[5]] = confidence[5]  # ... but row 5, exactly at its class's threshold
    loss, mask = unlabelled_losses("flexmatch", weak_logits, strong_logits, spec(), thresholds)
    assert mask.tolist() == [i == 5 or (int(pseudo[i]) == int(pseudo[5]) and float(confidence[i]) >= float(
        confidence[5])) for i in range(10)]
    assert float(loss[5]) == pytest.approx(-float(torch.log_softmax(strong_logits[5], -1)[pseudo[5]]), rel=1e-6)


# ------------------------------------------------------------------------------ FlexMatch's thresholds


def identity_network(classes: int = 3) -> nn.Module:
    """logits = the pixels: an image of shape (1, 1, classes) is its own logits, exactly."""
    net = nn.Sequential(nn.Flatten(), nn.Linear(classes, classes, bias=False))
    with torch.no_grad():
        net[1].weight.copy_(torch.eye(classes))
    return net


def logit_row(label: int, confidence: float, classes: int = 3) -> list[float]:
    """Logits whose softmax puts `confidence` on `label` and the rest evenly on the others."""
    row = [0.0] * classes
    row[label] = math.log(confidence * (classes - 1) / (1 - confidence))
    return row


TAU_FIXMATCH = 0.7  # a different τ for FixMatch: thresholds built from it, or records selected at it, show
# the unlabelled records of the threshold runs: (pseudo-label, confidence)
CONFIDENT = [(0, c) for c in (0.95, 0.96, 0.97, 0.98, 0.99, 0.955, 0.965, 0.975, 0.985, 0.93)] + [
    (1, c) for c in (0.9, 0.94, 0.95, 0.96, 0.97)] + [(2, 0.96), (2, 0.92)]  # counts 10, 5, 2
BETWEEN = [(0, 0.85), (0, 0.8), (1, 0.75), (2, 0.88)]  # confident at FixMatch's τ, not at FlexMatch's
UNSURE = [(0, 0.5), (1, 0.6), (2, 0.45)]
RECORDS = CONFIDENT + BETWEEN + UNSURE  # 24: 17 selected in the end, 7 never


def threshold_set(order: list[int] | None = None) -> tuple[TrainingSet, float]:
    """The records above as images of shape (1, 1, 3) (their own logits), 4 labelled ones, and
    FlexMatch's τ: the confidence of the class-1 record at 0.9, bit for bit as the training
    computes it (so that one record is selected exactly at τ)."""
    rows = [logit_row(label, c) for label, c in RECORDS]
    unlabelled = torch.tensor(rows, dtype=torch.float32).reshape(-1, 1, 1, 3)
    if order is not None:
        unlabelled = unlabelled[order]
    labelled = torch.tensor([logit_row(k % 3, 0.6) for k in range(4)], dtype=torch.float32).reshape(-1, 1, 1, 3)
    at_tau = torch.tensor(logit_row(1, 0.9), dtype=torch.float32).double()
    tau = float(torch.softmax(at_tau, -1).max())
    return TrainingSet(labelled, torch.arange(4) % 3, unlabelled, 3), tau


def expected_thresholds(selected: list[int], classes: int, tau: float) -> tuple[list[float], int, int]:
    """τ·M(β(c)), β(c) = σ(c) / max(max σ, unused); with the largest count and the unused count."""
    counts = [sum(1 for s in selected if s == c) for c in range(classes)]
    unused = sum(1 for s in selected if s < 0)
    top = max(max(counts), unused, 1)
    return [tau * flexmatch_m(k / top) for k in counts], max(counts), unused


def recording(monkeypatch) -> tuple[list, list]:
    """Every take of the index cycles (set size, indices) and every unlabelled-loss call (weak
    logits, class thresholds, mask) of a training."""
    takes, calls = [], []

    class Recorded(semi_supervised._Cycle):
        def take(self, k):
            out = super().take(k)
            takes.append((self.n, out.clone()))
            return out

    original = semi_supervised.unlabelled_losses

    def losses(algorithm, logits_weak, logits_strong, train_spec, class_thresholds=None):
        per_image, mask = original(algorithm, logits_weak, logits_strong, train_spec, class_thresholds)
        calls.append((logits_weak.detach().clone(), None if class_thresholds is None else class_thresholds.clone(),
                      mask.clone()))
        return per_image, mask

    monkeypatch.setattr(semi_supervised, "_Cycle", Recorded)
    monkeypatch.setattr(semi_supervised, "unlabelled_losses", losses)
    return takes, calls


def test_flexmatch_thresholds_rise_from_warm_up_to_tau_as_confident_predictions_accumulate(monkeypatch):
    """A fixed model (lr 0), 24 unlabelled records, 4 a step for 12 steps (two passes). Replayed
    here from the records each step drew: the thresholds are τ·M(β) of the selections so far,
    with FlexMatch's τ (FixMatch's is 0.7), the mask compares each record's confidence with its
    class's threshold, and a record is selected when its confidence reaches FlexMatch's τ (one
    record sits exactly on it). Class 0's threshold starts at 0, grows while the unused records
    dominate (warm-up) and reaches τ itself once its count passes theirs."""
    data, tau = threshold_set()
    takes, calls = recording(monkeypatch)
    train_spec = spec(steps=12, checkpoint_every=12, batch_size=2, unlabelled_ratio=2, lr=0.0,
                      thresholds={"fixmatch": TAU_FIXMATCH, "flexmatch": tau})
    kept, history = train("flexmatch", identity_network(), data, train_spec, PLAIN, 0, CPU, log=quiet)
    probs = torch.softmax(data.unlabelled.flatten(1).double(), -1)
    confidence, pseudo = probs.max(-1).values.tolist(), probs.argmax(-1).tolist()
    batches = [idx.tolist() for n, idx in takes if n == len(RECORDS)]
    assert len(batches) == len(calls) == 12
    selected, class0, masks = [-1] * len(RECORDS), [], []
    for idx, (logits_weak, thresholds, mask) in zip(batches, calls):
        assert torch.equal(logits_weak, data.unlabelled[idx].flatten(1))  # the batch is these records
        want, top, unused = expected_thresholds(selected, 3, tau)
        assert thresholds.tolist() == pytest.approx(want, rel=1e-12, abs=1e-15)
        want_mask = [confidence[i] >= want[pseudo[i]] for i in idx]
        assert all(abs(confidence[i] - want[pseudo[i]]) > 1e-9 for i in idx)  # no record on a threshold
        assert mask.tolist() == want_mask
        masks += want_mask
        class0.append((want[0], top, unused))
        for i in idx:
            if confidence[i] >= tau:
                selected[i] = pseudo[i]
    # every record seen: the confident ones selected with their label, the others never
    assert selected == [label if c >= 0.9 else -1 for label, c in RECORDS]
    final = expected_thresholds(selected, 3, tau)[0]
    assert final == pytest.approx([tau, tau * flexmatch_m(0.5), tau * flexmatch_m(0.2)])  # β = 1, 1/2, 1/5
    assert class0[0] == (0.0, 0, 24)  # the first batch: nothing selected, every threshold 0
    assert any(0 < t < tau and top < unused for t, top, unused in class0)  # warm-up, part way up
    assert any(t == pytest.approx(tau, rel=1e-12) and top >= unused for t, top, unused in class0)  # at τ
    assert [t for t, _, _ in class0] == sorted(t for t, _, _ in class0)  # class 0 only gains records here
    assert history[0]["mask_rate"] == pytest.approx(sum(masks) / len(masks), rel=1e-12)
    assert 0 < history[0]["mask_rate"] < 1


def test_flexmatch_masks_the_second_pass_with_the_thresholds_of_the_first():
    """All 24 records each step: the first step masks nothing out (every threshold 0), the second
    uses τ·M(β) of every confident prediction, β = (1, 1/2, 1/5) here: 3 of 24 records fall below
    their class's threshold (class 0 at τ = 0.9 drops 0.85, 0.8 and 0.5). Thresholds kept at 0,
    or built from FixMatch's τ (0.7), mask 24 and 23."""
    data, tau = threshold_set()
    train_spec = spec(steps=2, checkpoint_every=1, batch_size=2, unlabelled_ratio=12, lr=0.0,
                      thresholds={"fixmatch": TAU_FIXMATCH, "flexmatch": tau})
    _, history = train("flexmatch", identity_network(), data, train_spec, PLAIN, 0, CPU, log=quiet)
    assert [row["mask_rate"] for row in history] == [1.0, 21 / 24]


def test_flexmatch_thresholds_of_a_batch_in_the_middle_of_warm_up():
    # 3 of class 0, 1 of class 2, 6 unused: warm-up, β = count / 6
    selected = torch.tensor([0, -1, 0, 2, -1, -1, 0, -1, -1, -1])
    tau = 0.8
    expected = [tau * flexmatch_m(3 / 6), 0.0, tau * flexmatch_m(1 / 6)]
    assert flexmatch_thresholds(selected, 3, tau).tolist() == pytest.approx(expected)
    assert flexmatch_thresholds(torch.tensor([1, 1]), 2, tau).tolist() == pytest.approx([0.0, tau])
    assert flexmatch_thresholds(torch.tensor([2]), 3, tau).tolist() == [0.0, 0.0, tau]  # one record, selected
    # no unlabelled record at all: every threshold 0, not 0 / 0
    assert flexmatch_thresholds(torch.zeros(0, dtype=torch.long), 3, tau).tolist() == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------ whole runs, step by step


CLASSES = 3


def full_batch_set(n_labelled: int = 6, n_unlabelled: int = 12, seed: int = 0) -> TrainingSet:
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(n_labelled + n_unlabelled, 1, 2, 3, generator=g)
    return TrainingSet(images[:n_labelled], torch.arange(n_labelled) % CLASSES, images[n_labelled:], CLASSES)


def linear_network(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Flatten(), nn.Linear(6, CLASSES))
    with torch.no_grad():
        net[1].weight.mul_(8)  # confidences spread over (1/3, 1)
    return net


def reference_run(algorithm: str, network: nn.Module, data: TrainingSet, train_spec: TrainSpec
                  ) -> tuple[dict[int, dict], list[dict]]:
    """What `train` does when every batch is the whole set and the views are the images:
    torch.optim.SGD's Nesterov step with weight decay written out, the cosine lr, the EMA and the
    history rows, from this file's own losses."""
    model, ema = copy.deepcopy(network), copy.deepcopy(network)
    params = list(model.parameters())
    buffers = [None] * len(params)
    n_steps, every = train_spec.steps, train_spec.checkpoint_every
    selected = [-1] * len(data.unlabelled)
    tau = train_spec.thresholds.get(algorithm)
    kept, history, sums = {}, [], {"loss_labelled": [], "loss_unlabelled": [], "mask_rate": []}
    for k in range(n_steps):
        lr = train_spec.lr * math.cos(math.pi * k / (2 * n_steps))
        log_p = torch.log_softmax(model(data.labelled), -1)
        loss_l = -log_p[torch.arange(len(data.labels)), data.labels].mean()
        loss = loss_l
        if algorithm != "supervised":
            logits_u = model(data.unlabelled)
            rows = logits_u.detach().double().tolist()
            probs = [softmax(r) for r in rows]
            confidence = [max(p) for p in probs]
            pseudo = [p.index(max(p)) for p in probs]
            log_q = torch.log_softmax(logits_u, -1)
            if algorithm == "flexmatch":
                thresholds = expected_thresholds(selected, CLASSES, tau)[0]
                limits = [thresholds[c] for c in pseudo]
            else:
                limits = [tau] * len(rows)
            assert all(abs(c - t) > 1e-6 for c, t in zip(confidence, limits))  # no confidence on a threshold
            mask = torch.tensor([c >= t for c, t in zip(confidence, limits)])
            if algorithm == "uda":
                target = torch.tensor([softmax(r, train_spec.uda_temperature) for r in rows], dtype=log_q.dtype)
                per_image = -(target * log_q).sum(-1)
            else:
                per_image = -log_q[torch.arange(len(pseudo)), torch.tensor(pseudo)]
            loss_u = (per_image * mask).mean()
            loss = loss + train_spec.unlabelled_weight * loss_u
            sums["loss_unlabelled"].append(float(loss_u.detach()))
            sums["mask_rate"].append(float(mask.double().mean()))
            if algorithm == "flexmatch":
                selected = [p if c >= tau else s for p, c, s in zip(pseudo, confidence, selected)]
        sums["loss_labelled"].append(float(loss_l.detach()))
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(params, grads)):
                d = g + train_spec.weight_decay * p
                buffers[i] = d.clone() if buffers[i] is None else train_spec.momentum * buffers[i] + d
                p -= lr * (d + train_spec.momentum * buffers[i])
            for e, p in zip(ema.parameters(), params):
                e.copy_(train_spec.ema * e + (1 - train_spec.ema) * p)
        if (k + 1) % every == 0:
            kept[k + 1] = {name: v.clone() for name, v in ema.state_dict().items()}
            row = {"step": k + 1, "lr": lr, **{name: sum(v) / every if v else math.nan for name, v in sums.items()}}
            history.append(row)
            sums = {name: [] for name in sums}
    return kept, history


def assert_close_runs(got: tuple, want: tuple) -> None:
    (kept, history), (want_kept, want_history) = got, want
    assert sorted(kept) == sorted(want_kept)
    for step in want_kept:
        for name, value in want_kept[step].items():
            assert torch.allclose(kept[step][name], value, rtol=1e-5, atol=1e-6), (step, name)
    assert [row["step"] for row in history] == [row["step"] for row in want_history]
    for row, want_row in zip(history, want_history):
        assert list(row) == [*want_row, "clipped_fraction"]  # these columns, in this order
        for name, value in want_row.items():
            if math.isnan(value):
                assert math.isnan(row[name]), name
            else:
                assert row[name] == pytest.approx(value, rel=1e-5, abs=1e-7), (row["step"], name)
        assert math.isnan(row["clipped_fraction"])


RUN_THRESHOLDS = {"fixmatch": 0.6, "flexmatch": 0.75, "uda": 0.55}


@pytest.mark.parametrize("algorithm", ["supervised", "fixmatch", "flexmatch", "uda"])
def test_training_is_nesterov_sgd_at_the_cosine_lr_with_the_ema_of_the_weights(algorithm):
    """Six steps, two checkpoints of three, every batch the whole set (B = n_l, μB = n_u) and no
    augmentation: the kept EMA states and the history rows are those of the reference above, for
    λ_u = 0.5 and UDA at T = 0.7."""
    data = full_batch_set()
    if algorithm == "supervised":
        data.unlabelled = data.unlabelled[:0]
    train_spec = spec(steps=6, checkpoint_every=3, batch_size=6, unlabelled_ratio=2, lr=0.3, momentum=0.8,
                      weight_decay=0.02, ema=0.6, thresholds=RUN_THRESHOLDS, uda_temperature=0.7,
                      unlabelled_weight=0.5)
    want = reference_run(algorithm, linear_network(), data, train_spec)
    if algorithm != "supervised":  # the unlabelled term took part, and not at every record
        assert all(0 < row["mask_rate"] < 1 for row in want[1]) or algorithm == "flexmatch"
    got = train(algorithm, linear_network(), data, train_spec, PLAIN, 0, CPU, log=quiet)
    assert_close_runs(got, want)


def test_the_history_row_is_logged_with_every_measure():
    messages = []
    data = full_batch_set()
    train("fixmatch", linear_network(), data, spec(steps=2, checkpoint_every=1, batch_size=6, unlabelled_ratio=2,
                                                   thresholds=RUN_THRESHOLDS), PLAIN, 0, CPU, log=messages.append)
    _, history = train("fixmatch", linear_network(), data, spec(steps=2, checkpoint_every=1, batch_size=6,
                                                                unlabelled_ratio=2, thresholds=RUN_THRESHOLDS),
                       PLAIN, 0, CPU, log=quiet)
    # the step in the prefix only, then every other column of the row, as "name value" to 4 digits
    # (between them, the progress lines of privssl.io.Progress)
    assert [m for m in messages if not m.startswith("fixmatch steps: ")] == [f"fixmatch step {row['step']}/2: " + ", ".join(f"{k} {row[k]:.4g}" for k in (
        "lr", "loss_labelled", "loss_unlabelled", "mask_rate", "clipped_fraction")) for row in history]


# ------------------------------------------------------------------------------ DP-SGD


def test_poisson_rates_are_b_over_n_l_and_mu_b_over_n_u():
    train_spec = spec(batch_size=3, unlabelled_ratio=5)
    assert poisson_rates(train_spec, 10, 60) == (pytest.approx(0.3), pytest.approx(0.25))
    assert poisson_rates(train_spec, 3, 15) == (1.0, 1.0)  # rates of 1 are allowed
    assert sampling_rate(train_spec, 10, 60) == pytest.approx(0.3)
    assert sampling_rate(train_spec, 30, 20) == pytest.approx(0.75)
    assert poisson_rates(spec(batch_size=1, unlabelled_ratio=1), 1, 1) == (1.0, 1.0)  # one record each


@pytest.mark.parametrize("n_labelled, n_unlabelled", [(0, 10), (10, 0)])
def test_poisson_rates_refuse_an_empty_set_naming_both_sizes(n_labelled, n_unlabelled):
    with pytest.raises(ValueError, match=f"needs labelled and unlabelled images, got {n_labelled} and {n_unlabelled}"):
        poisson_rates(spec(), n_labelled, n_unlabelled)


def test_poisson_rates_refusal_names_the_batches_and_the_sets():
    with pytest.raises(ValueError, match=r"B = 4, μB = 8 exceed the sets \(3 labelled, 32 unlabelled\)"):
        poisson_rates(spec(), 3, 32)


def step_seed(seed: int) -> int:
    """train_private's first step seed: the first draw of the run's generator (no permutation)."""
    return int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(seed)))


def sampled(ids: torch.Tensor, rate: float, seed: int, salt: int) -> torch.Tensor:
    """Keyed Poisson sampling: hash(step seed, salt, 0, id) < ⌊rate · 2³²⌋ (salts: labelled 0, unlabelled 1)."""
    return keyed_hash(seed, salt, 0, ids) < math.floor(rate * 2**32)


def private_set(seed: int = 0) -> TrainingSet:
    data = full_batch_set(8, 24, seed)
    data.labelled_ids, data.unlabelled_ids = torch.arange(8) * 5 + 3, torch.arange(24) * 7 + 1
    return data


PRIVATE_SPEC = spec(steps=1, checkpoint_every=1, batch_size=3, unlabelled_ratio=2, lr=0.5, momentum=0.0,
                    weight_decay=0.0, ema=0.0, thresholds={"fixmatch": 0.5}, unlabelled_weight=0.6)
# q_l = 3/8, q_u = 6/24


def clipped(g: torch.Tensor, c: float) -> torch.Tensor:
    return g * min(1.0, c / float(g.norm()))


def test_dpsgd_step_clips_each_scaled_gradient_to_c_and_divides_the_sum_by_b():
    """One step without noise on Poisson batches recomputed here: each sampled labelled record's
    gradient of its cross-entropy, each sampled confident unlabelled record's gradient times
    λ_u / μ, each clipped to C on its own, summed, over B (not over the records drawn); and the
    history row: the mask rate, the clipped fraction, the labelled loss after the step."""
    data = private_set()
    seed = 3
    s = step_seed(seed)
    in_l = sampled(data.labelled_ids, 3 / 8, s, 0)
    in_u = sampled(data.unlabelled_ids, 6 / 24, s, 1)
    assert 0 < int(in_l.sum()) and 0 < int(in_u.sum())
    model = linear_network()
    flat_params = list(model.parameters())
    x, y, u = data.labelled[in_l], data.labels[in_l], data.unlabelled[in_u]
    probs = torch.softmax(model(u).detach().double(), -1)
    confidence, pseudo = probs.max(-1)
    ordered = confidence.sort().values
    tau = float(ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2  # half the records pass
    mask = confidence >= tau
    assert 0 < int(mask.sum()) < len(mask)
    per_record = []  # (flat gradient, its norm after the scale)
    for inputs, targets, weight in ((x, y, 1.0), (u[mask], pseudo[mask], 0.6 / 2)):
        for xi, ti in zip(inputs, targets):
            g = torch.autograd.grad(F.cross_entropy(model(xi[None]), ti[None]), flat_params)
            flat = torch.cat([v.flatten() for v in g]) * weight
            per_record.append(flat)
    norms = torch.stack([g.norm() for g in per_record])
    clip = float(norms.median())  # half the records clipped
    total = sum(clipped(g, clip) for g in per_record)
    step = total / 3
    start = torch.cat([p.detach().flatten() for p in flat_params])
    expected = start - 0.5 * step
    private = PrivateSpec(0.0, clip)
    train_spec = spec(**{**PRIVATE_SPEC.__dict__, "thresholds": {"fixmatch": tau}})
    kept, history = train_private(linear_network(), data, train_spec, private, PLAIN, seed, CPU, log=quiet)
    got = torch.cat([kept[1][name].flatten() for name, _ in model.named_parameters()])
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6)
    moved = copy.deepcopy(model)
    torch.nn.utils.vector_to_parameters(expected.float(), moved.parameters())
    row = history[0]
    assert list(row) == ["step", "lr", "loss_labelled", "loss_unlabelled", "mask_rate", "clipped_fraction"]
    assert row["step"] == 1 and row["lr"] == 0.5 and math.isnan(row["loss_unlabelled"])
    assert row["mask_rate"] == pytest.approx(float(mask.double().mean()), rel=1e-12)
    assert row["clipped_fraction"] == pytest.approx(float((norms > clip).double().mean()), rel=1e-12)
    assert 0 < row["clipped_fraction"] < 1
    assert row["loss_labelled"] == pytest.approx(float(F.cross_entropy(moved(x), y).detach()), rel=1e-5)


def test_dpsgd_mask_holds_a_confidence_exactly_at_tau():
    """Every record sampled (rates 1), identity logits: FixMatch's τ set to one record's
    confidence as the training computes it; that record counts in the mask rate."""
    data, _ = threshold_set()
    probs = torch.softmax(data.unlabelled.flatten(1).double(), -1).max(-1).values
    tau = float(probs[16])  # a class-2 record at 0.92: 16 of 24 at or above it
    assert int((probs >= tau).sum()) == 16 and int((probs > tau).sum()) == 15
    train_spec = spec(steps=1, checkpoint_every=1, batch_size=4, unlabelled_ratio=6, lr=0.0,
                      thresholds={"fixmatch": tau})
    _, history = train_private(identity_network(), data, train_spec, PrivateSpec(0.0, 1.0), PLAIN, 0, CPU, log=quiet)
    assert history[0]["mask_rate"] == 16 / 24


def test_dpsgd_steps_follow_the_cosine_lr_and_their_history_rows_are_means_over_the_steps():
    """Four steps, two checkpoints of two, every record sampled (rates 1), C between the
    gradients' norms: SGD on (Σ clipped labelled gradients + Σ clipped λ_u/μ-scaled confident
    unlabelled ones) / B at η·cos(πk / 8), the EMA at 0.5; each history row the mean over its two
    steps of the labelled loss after the step, the mask rate and the clipped fraction."""
    data = private_set()
    train_spec = spec(steps=4, checkpoint_every=2, batch_size=8, unlabelled_ratio=3, lr=0.4, momentum=0.0,
                      weight_decay=0.0, ema=0.5, thresholds={"fixmatch": 0.5}, unlabelled_weight=0.6)
    clip = 0.3
    model = linear_network()
    ema = copy.deepcopy(model)
    params = list(model.parameters())
    measures = []
    for k in range(4):
        with torch.no_grad():
            confidence, pseudo = torch.softmax(model(data.unlabelled).double(), -1).max(-1)
        mask = confidence >= 0.5
        gradients, norms = [], []
        for inputs, targets, weight in ((data.labelled, data.labels, 1.0),
                                        (data.unlabelled[mask], pseudo[mask], 0.6 / 3)):
            for xi, ti in zip(inputs, targets):
                g = torch.autograd.grad(F.cross_entropy(model(xi[None]), ti[None]), params)
                g = [v * weight for v in g]
                norm = float(torch.cat([v.flatten() for v in g]).norm())
                norms.append(norm)
                gradients.append([v * min(1.0, clip / norm) for v in g])
        with torch.no_grad():
            for i, (p, e) in enumerate(zip(params, ema.parameters())):
                p -= 0.4 * math.cos(math.pi * k / 8) * sum(g[i] for g in gradients) / 8
                e.copy_(0.5 * e + 0.5 * p)
            loss = float(F.cross_entropy(model(data.labelled), data.labels))
        measures.append((loss, float(mask.double().mean()), sum(n > clip for n in norms) / len(norms)))
    kept, history = train_private(linear_network(), data, train_spec, PrivateSpec(0.0, clip), PLAIN, 0, CPU,
                                  log=quiet)
    for name, value in ema.state_dict().items():
        assert torch.allclose(kept[4][name], value, rtol=1e-5, atol=1e-6), name
    assert [row["step"] for row in history] == [2, 4]
    for row, pair in zip(history, (measures[:2], measures[2:])):
        assert row["lr"] == pytest.approx(0.4 * math.cos(math.pi * (row["step"] - 1) / 8), rel=1e-12)
        want = [sum(m[j] for m in pair) / 2 for j in range(3)]
        assert [row["loss_labelled"], row["mask_rate"], row["clipped_fraction"]] == pytest.approx(want, rel=1e-5)
    assert all(m[0] > 0 and 0 < m[1] < 1 and 0 < m[2] < 1 for m in measures)  # no measure 0: a sum is seen


def test_dpsgd_step_without_labelled_records_still_takes_the_unlabelled_ones():
    """A step whose Poisson batch holds no labelled record but confident unlabelled ones: their
    clipped, scaled gradients alone make the step."""
    data = private_set()
    model = linear_network()
    with torch.no_grad():
        confidence, pseudo = torch.softmax(model(data.unlabelled).double(), -1).max(-1)
    seed = next(s for s in range(2000) if not sampled(data.labelled_ids, 3 / 8, step_seed(s), 0).any()
                and (sampled(data.unlabelled_ids, 6 / 24, step_seed(s), 1) & (confidence >= 0.5)).any())
    in_u = sampled(data.unlabelled_ids, 6 / 24, step_seed(seed), 1) & (confidence >= 0.5)
    params = list(model.parameters())
    total = 0
    for xi, ti in zip(data.unlabelled[in_u], pseudo[in_u]):
        g = torch.autograd.grad(F.cross_entropy(model(xi[None]), ti[None]), params)
        total = total + clipped(torch.cat([v.flatten() for v in g]) * 0.3, 0.05)
    expected = torch.cat([p.detach().flatten() for p in params]) - 0.5 * total / 3
    kept, history = train_private(linear_network(), data, PRIVATE_SPEC, PrivateSpec(0.0, 0.05), PLAIN, seed, CPU,
                                  log=quiet)
    got = torch.cat([kept[1][name].flatten() for name, _ in model.named_parameters()])
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert not torch.allclose(got, torch.cat([p.detach().flatten() for p in params]))
    assert history[0]["loss_labelled"] == 0.0


def test_dpsgd_noise_has_std_sigma_c_over_b():
    """The same step at σ = 0 and σ = 2 with C = 0.25 (σC ≠ σ/C ≠ σ), B = 3: the difference of
    the weights is lr σC / B times standard normal noise."""
    data = private_set()
    clip = 0.25
    clean, _ = train_private(linear_network(), data, PRIVATE_SPEC, PrivateSpec(0.0, clip), PLAIN, 1, CPU, log=quiet)
    noisy, _ = train_private(linear_network(), data, PRIVATE_SPEC, PrivateSpec(2.0, clip), PLAIN, 1, CPU, log=quiet)
    z = torch.cat([(clean[1][k] - noisy[1][k]).flatten() for k in clean[1]]).double() * 3 / (0.5 * 2.0 * clip)
    assert len(z) == 21
    assert stats.kstest(z.numpy(), "norm").pvalue > 1e-3
    assert 0.5 < float(z.std()) < 1.6


class NoEmptyBatch(nn.Sequential):
    """A network that refuses an empty batch, as some do (BatchNorm in training mode)."""

    def forward(self, x):
        if not len(x):
            raise RuntimeError("an empty batch")
        return super().forward(x)


def test_an_empty_poisson_batch_steps_by_the_noise_alone():
    """A step that samples no record (rates 1/20): the network is not run on the empty batches,
    the weights move by the noise only, σC / B per coordinate, and the history row has zeros,
    not a mean of nothing."""
    data = TrainingSet(torch.rand(20, 1, 2, 3), torch.arange(20) % 3, torch.rand(20, 1, 2, 3), 3)
    ids = torch.arange(20)
    seed = next(s for s in range(200) if not sampled(ids, 1 / 20, step_seed(s), 0).any()
                and not sampled(ids, 1 / 20, step_seed(s), 1).any())
    train_spec = spec(steps=1, checkpoint_every=1, batch_size=1, unlabelled_ratio=1, lr=0.5, momentum=0.0,
                      weight_decay=0.0, ema=0.0, thresholds={"fixmatch": 0.5})
    network = NoEmptyBatch(nn.Flatten(), nn.Linear(6, 3))
    network.load_state_dict(linear_network().state_dict())
    kept, history = train_private(network, data, train_spec, PrivateSpec(0.0, 1.0), PLAIN, seed, CPU, log=quiet)
    start = linear_network().state_dict()
    assert all(torch.equal(kept[1][k], start[k]) for k in start)  # no noise, no record: no move
    row = history[0]
    assert (row["loss_labelled"], row["mask_rate"], row["clipped_fraction"]) == (0.0, 0.0, 0.0)
    noisy, _ = train_private(linear_network(), data, train_spec, PrivateSpec(3.0, 0.5), PLAIN, seed, CPU, log=quiet)
    z = torch.cat([(noisy[1][k] - start[k]).flatten() for k in start]).double() / (0.5 * 3.0 * 0.5)
    assert bool((z != 0).all()) and stats.kstest(z.numpy(), "norm").pvalue > 1e-3


def test_dpsgd_logs_its_sigma_and_steps():
    messages = []
    data = private_set()
    train_private(linear_network(), data, spec(steps=2, checkpoint_every=1, batch_size=3, unlabelled_ratio=2,
                                               thresholds={"fixmatch": 0.5}),
                  PrivateSpec(1.5, 1.0), PLAIN, 0, CPU, log=messages.append)
    _, history = train_private(linear_network(), data, spec(steps=2, checkpoint_every=1, batch_size=3,
                                                            unlabelled_ratio=2, thresholds={"fixmatch": 0.5}),
                               PrivateSpec(1.5, 1.0), PLAIN, 0, CPU, log=quiet)
    assert [m for m in messages if not m.startswith("fixmatch (DP-SGD) steps: ")] == [
        f"fixmatch (DP-SGD, σ = 1.5) step {row['step']}/2: " + ", ".join(
        f"{k} {row[k]:.4g}" for k in ("lr", "loss_labelled", "loss_unlabelled", "mask_rate", "clipped_fraction"))
        for row in history]


# ------------------------------------------------------------------------------ resumption


class Interrupted(Exception):
    pass


def stop_after(marker: str):
    def log(message: str) -> None:
        if marker in message:
            raise Interrupted(message)
    return log


def same_runs(a: tuple, b: tuple) -> None:
    (kept_a, history_a), (kept_b, history_b) = a, b
    assert sorted(kept_a) == sorted(kept_b)
    for step in kept_a:
        assert all(torch.equal(kept_a[step][k], kept_b[step][k]) for k in kept_a[step]), step
    assert len(history_a) == len(history_b)
    for row_a, row_b in zip(history_a, history_b):
        assert list(row_a) == list(row_b)
        for x, y in zip(row_a.values(), row_b.values()):
            assert x == y or (math.isnan(x) and math.isnan(y)), (row_a, row_b)


def test_a_resumed_flexmatch_run_equals_the_uninterrupted_one(tmp_path):
    """FlexMatch's selections are part of what a restarted job needs: resumed at step 4 of 8, the
    run's thresholds, masks and weights continue as if never stopped (its mask rate falls
    between the checkpoints as records are selected)."""
    data, tau = threshold_set()
    train_spec = spec(steps=8, checkpoint_every=2, batch_size=2, unlabelled_ratio=3, lr=0.05,
                      thresholds={"fixmatch": TAU_FIXMATCH, "flexmatch": tau})

    def run(checkpoint=None, log=quiet):
        return train("flexmatch", identity_network(), data, train_spec, PLAIN, 0, CPU, checkpoint, {"run": "f"}, log)

    whole = run()
    rates = [row["mask_rate"] for row in whole[1]]
    assert rates[0] == 1.0 and min(rates) < 1.0  # the thresholds bite after the warm-up
    checkpoint = tmp_path / "flex.pt"
    with pytest.raises(Interrupted):
        run(checkpoint, stop_after("step 4/8:"))
    saved = torch.load(checkpoint, weights_only=False)
    assert saved["step"] == 4 and int((saved["selected"] >= 0).sum()) > 0
    messages = []
    same_runs(run(checkpoint, messages.append), whole)
    assert messages[0] == f"resumed from {checkpoint} at step 4"


def test_a_resumed_dpsgd_run_equals_the_uninterrupted_one(tmp_path):
    """The noise and the step seeds come from the run's generator, saved with the weights: a run
    resumed at step 2 of 4 draws the same batches and noise."""
    data = private_set()
    train_spec = spec(steps=4, checkpoint_every=2, batch_size=3, unlabelled_ratio=2, thresholds={"fixmatch": 0.5})
    private = PrivateSpec(1.0, 0.5)

    def run(checkpoint=None, log=quiet):
        return train_private(linear_network(), data, train_spec, private, PLAIN, 0, CPU, checkpoint, {"run": "p"}, log)

    whole = run()
    checkpoint = tmp_path / "private.pt"
    with pytest.raises(Interrupted):
        run(checkpoint, stop_after("step 2/4:"))
    assert torch.load(checkpoint, weights_only=False)["selected"] is None  # no FlexMatch state in DP-SGD
    messages = []
    same_runs(run(checkpoint, messages.append), whole)
    assert messages[0] == f"resumed from {checkpoint} at step 2"


def test_cosine_lr_at_a_quarter_of_the_steps():
    assert cosine_lr(0.2, 1, 4) == pytest.approx(0.2 * math.cos(math.pi / 8), rel=1e-12)
    assert cosine_lr(0.2, 3, 4) == pytest.approx(0.2 * math.cos(3 * math.pi / 8), rel=1e-12)


# ------------------------------------------------------------------------------ edges of the API


@pytest.mark.parametrize("algorithm", ["fixmatch", "flexmatch", "uda"])
def test_the_losses_of_one_unbatched_image_are_its_row_of_the_batch(algorithm):
    """Classes are the last axis: one image's logits (C,) give that image's loss and mask."""
    weak_logits, strong_logits = weak_strong(4)
    train_spec = spec(thresholds={"fixmatch": 0.6, "flexmatch": 0.6, "uda": 0.6})
    thresholds = torch.tensor([0.3, 0.9, 0.5, 0.7], dtype=torch.float64)
    batch_loss, batch_mask = unlabelled_losses(algorithm, weak_logits, strong_logits, train_spec, thresholds)
    assert 0 < int(batch_mask.sum()) < len(batch_mask)
    for i in range(len(weak_logits)):
        loss, mask = unlabelled_losses(algorithm, weak_logits[i], strong_logits[i], train_spec, thresholds)
        assert loss.shape == mask.shape == ()
        assert bool(mask) == bool(batch_mask[i])
        assert float(loss) == pytest.approx(float(batch_loss[i]), rel=1e-6, abs=1e-7)


def test_unknown_algorithms_are_refused_naming_the_allowed_ones():
    weak_logits, strong_logits = weak_strong(0)
    with pytest.raises(ValueError, match="unknown algorithm 'mixmatch'; allowed: fixmatch, flexmatch, uda$"):
        unlabelled_losses("mixmatch", weak_logits, strong_logits, spec(thresholds={"mixmatch": 0.9}))
    allowed = "allowed: fixmatch, flexmatch, uda, supervised$"
    with pytest.raises(ValueError, match=f"unknown algorithm 'mixmatch'; {allowed}"):
        train("mixmatch", linear_network(), full_batch_set(), spec(), PLAIN, 0, CPU, log=quiet)


def test_a_cycle_of_one_record_repeats_it_and_an_empty_set_is_refused():
    cycle = semi_supervised._Cycle(1, torch.Generator().manual_seed(0))
    assert cycle.take(3).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="cannot draw batches from 0 records; allowed: at least 1"):
        semi_supervised._Cycle(0, torch.Generator().manual_seed(0))


class Moved(nn.Sequential):
    """A network that records the devices it is moved to."""

    def __init__(self, *layers):
        super().__init__(*layers)
        self.moved_to = []

    def to(self, *args, **kwargs):
        self.moved_to.append(args[0] if args else kwargs.get("device"))
        return super().to(*args, **kwargs)


def test_training_moves_the_network_to_the_device_and_saves_its_fingerprint(tmp_path):
    """The network is moved to the device given (on a GPU machine, the GPU); a checkpoint holds
    the run's fingerprint, an empty record when none is given."""
    data = full_batch_set()
    for name, run in (("train", lambda net, ckpt: train("fixmatch", net, data, spec(steps=1, checkpoint_every=1,
                                                                                  batch_size=6, unlabelled_ratio=2),
                                                       PLAIN, 0, CPU, ckpt, log=quiet)),
                      ("private", lambda net, ckpt: train_private(net, private_set(), PRIVATE_SPEC,
                                                                  PrivateSpec(1.0, 1.0), PLAIN, 0, CPU, ckpt,
                                                                  log=quiet))):
        torch.manual_seed(0)
        net = Moved(nn.Flatten(), nn.Linear(6, CLASSES))
        checkpoint = tmp_path / f"{name}.pt"
        run(net, checkpoint)
        assert net.moved_to[:1] == [CPU], name
        assert torch.load(checkpoint, weights_only=False)["fingerprint"] == {}, name


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("algorithm", ["fixmatch", "flexmatch", "uda", "supervised", "fixmatch_dpsgd"])
def test_training_on_a_gpu_moves_every_input_there_and_keeps_cpu_states(algorithm):
    """On a GPU the batches, labels and FlexMatch's thresholds must be moved to the network's
    device (on the CPU, where the mutation runs are, `.to(device)` and `.to(None)` cannot be told
    apart): a few steps run, and the kept EMA states are CPU tensors close to the CPU run's."""
    gpu = torch.device("cuda")
    data, _ = threshold_set()
    if algorithm == "supervised":
        data.unlabelled = data.unlabelled[:0]
    # thresholds ≥ 0.01 from every record's confidence: rounding on the GPU decides no mask
    train_spec = spec(steps=4, checkpoint_every=2, batch_size=2, unlabelled_ratio=3, lr=0.05,
                      thresholds={"fixmatch": 0.82, "flexmatch": 0.91, "uda": 0.82})
    runs = {}
    for device in (CPU, gpu):
        if algorithm == "fixmatch_dpsgd":
            runs[device.type] = train_private(identity_network().to(device), data, train_spec, PrivateSpec(0.0, 1.0),
                                              PLAIN, 0, device, log=quiet)
        else:
            runs[device.type] = train(algorithm, identity_network().to(device), data, train_spec, PLAIN, 0, device,
                                      log=quiet)
    # the non-private trainings run under bf16 autocast on CUDA (privssl.training.precision): 8-bit
    # mantissas give differences of 1e-4 after 4 steps; the private one is float32 on both devices
    rtol, atol = (1e-4, 1e-5) if algorithm == "fixmatch_dpsgd" else (2e-2, 2e-3)
    for step, state in runs["cuda"][0].items():
        for name, value in state.items():
            assert value.device.type == "cpu"
            assert torch.allclose(value, runs["cpu"][0][step][name], rtol=rtol, atol=atol), (step, name)


# ------------------------------------------------------------------------------ DP-SGD's draws and records


def test_a_record_whose_hash_is_the_rate_threshold_is_not_sampled():
    """hash < ⌊q · 2³²⌋, not ≤: a record is sampled with probability ⌊q · 2³²⌋ / 2³² ≤ q, never
    above the rate the accountant is given. At q = hash / 2³² exactly, the record is left out,
    and one 2⁻³² above it, taken."""
    data = private_set()
    ids_l, _ = data.record_ids()
    seed = 11
    chosen = int(keyed_hash(seed, semi_supervised_private._LABELLED_SAMPLE, 0, ids_l[:1]))
    at_threshold = private_batch(data, PRIVATE_SPEC, (chosen / 2**32, 0.5), PLAIN, seed)
    just_above = private_batch(data, PRIVATE_SPEC, ((chosen + 1) / 2**32, 0.5), PLAIN, seed)
    assert not at_threshold.sampled_labelled[0] and just_above.sampled_labelled[0]


def test_record_ids_of_any_integer_type_key_the_same_draws():
    """Ids given as int32 are the same records as the int64 ones: the same sampling and views."""
    data = private_set()
    narrow = copy.copy(data)
    narrow.labelled_ids, narrow.unlabelled_ids = data.labelled_ids.int(), data.unlabelled_ids.int()
    assert [ids.dtype for ids in narrow.record_ids()] == [torch.int64, torch.int64]
    augment = AugmentSpec(1, True, 0, 0)
    a, b = (private_batch(d, PRIVATE_SPEC, (0.5, 0.5), augment, 5) for d in (data, narrow))
    assert torch.equal(a.sampled_unlabelled, b.sampled_unlabelled) and torch.equal(a.weak, b.weak)


def test_the_strong_views_of_a_private_batch_share_draws_in_groups_of_the_expected_batch():
    """With images_per_draw = 2, RandAugment's groups are ⌈μB / 2⌉ (the expected unlabelled batch
    μB = 3 · 2 = 6, not B / μ): the strong views are strong_keyed's at expected batch 6."""
    g = torch.Generator().manual_seed(2)
    data = TrainingSet(torch.rand(8, 1, 8, 8, generator=g), torch.arange(8) % CLASSES,
                       torch.rand(24, 1, 8, 8, generator=g), CLASSES, torch.arange(8) * 5 + 3, torch.arange(24) * 7 + 1)
    augment = AugmentSpec(0, False, 2, 10, images_per_draw=2)
    batch = private_batch(data, PRIVATE_SPEC, (0.5, 0.5), augment, 21)
    ids_u = data.unlabelled_ids[batch.sampled_unlabelled]
    expected = strong_keyed(data.unlabelled[batch.sampled_unlabelled], ids_u, augment, 21,
                            semi_supervised_private._UNLABELLED_STRONG, 6)
    assert torch.equal(batch.strong, expected)
    other = strong_keyed(data.unlabelled[batch.sampled_unlabelled], ids_u, augment, 21,
                         semi_supervised_private._UNLABELLED_STRONG, 1.5)
    assert not torch.equal(batch.strong, other)  # where the test tells the two group counts apart


def test_poisson_rates_refusal_says_what_is_allowed():
    with pytest.raises(ValueError, match=r"allowed: B <= n_l and μB <= n_u \(Poisson sampling rates <= 1\)$"):
        poisson_rates(spec(), 3, 32)


def test_every_private_step_is_taken_once_and_kept_at_every_checkpoint():
    """Checkpoints at every step: one history row and one EMA state per step, and no step after
    the last (`run.step <= steps` would take a fourth and keep its row)."""
    kept, history = train_private(linear_network(), private_set(), spec(steps=3, checkpoint_every=1, batch_size=3,
                                                               unlabelled_ratio=2, thresholds={"fixmatch": 0.5}),
                                  PrivateSpec(1.0, 0.5), PLAIN, 0, CPU, log=quiet)
    assert [row["step"] for row in history] == [1, 2, 3] and sorted(kept) == [1, 2, 3]


# ------------------------------------------------------------------------------ resuming


@pytest.mark.parametrize("private", [False, True])
def test_a_resumed_run_counts_its_progress_from_where_it_resumed(tmp_path, private):
    """Resumed at step 2 of 4, the progress log counts the 2 steps left (2/2 at the end), not 4 + 2."""
    checkpoint = tmp_path / "run.pt"
    train_spec = spec(steps=4, checkpoint_every=2, batch_size=3, unlabelled_ratio=2, thresholds={"fixmatch": 0.5})

    def run(log):
        if private:
            return train_private(linear_network(), private_set(), train_spec, PrivateSpec(1.0, 0.5), PLAIN, 0, CPU,
                                 checkpoint, {"run": "p"}, log)
        return train("fixmatch", linear_network(), private_set(), train_spec, PLAIN, 0, CPU, checkpoint, {"run": "p"},
                     log)

    with pytest.raises(Interrupted):
        run(stop_after("step 2/4:"))
    messages = []
    run(messages.append)
    label = "fixmatch (DP-SGD) steps" if private else "fixmatch steps"
    counts = [m.split(":")[1].split("(")[0].strip() for m in messages if m.startswith(f"{label}: ")]
    assert counts == ["1/2", "2/2"]


def test_a_checkpoint_that_is_not_tensors_is_refused_quoting_the_loaders_first_line(tmp_path):
    """A pickle of anything else (here a Fraction, which weights_only refuses) is not unpickled: the
    job says so, quoting the first line of torch's reason, and how to go on."""
    checkpoint = tmp_path / "bad.pt"
    torch.save({"step": fractions.Fraction(1, 3)}, checkpoint)
    with pytest.raises(pickle.UnpicklingError) as reason:
        torch.load(checkpoint, map_location="cpu", weights_only=True)
    first_line = str(reason.value).splitlines()[0]
    assert len(str(reason.value).splitlines()) > 1  # where quoting another line would show
    with pytest.raises(InputError) as refused:
        train("fixmatch", linear_network(), full_batch_set(), spec(), PLAIN, 0, CPU, checkpoint, {"run": "f"}, quiet)
    message = str(refused.value)
    assert message.startswith(f"{checkpoint}: not a checkpoint of this training")
    assert f"containers: {first_line}); allowed: the file this job writes; delete it to train from the start" in message


def test_the_checkpoint_fingerprint_names_every_setting_it_is_resumed_under():
    """Each argument is a field of the record (a dataclass or dict spread by field), so changing one
    changes exactly its entries; the device's arithmetic and the thread count are recorded too."""
    args = dict(target="fixmatch_target", spec=spec(), augment=PLAIN, network={"depth": 28, "width": 2}, seed=3,
                device=CPU, data="digest-1", code="code-1")
    base = checkpoint_fingerprint(**args, noise_multiplier=1.5, clip_norm=0.5)
    assert {k: base[k] for k in ("target", "seed", "data", "code", "arithmetic", "threads", "noise_multiplier",
                                 "clip_norm", "network.depth", "train.steps", "augment.ops")} == {
        "target": "'fixmatch_target'", "seed": "3", "data": "'digest-1'", "code": "'code-1'", "arithmetic": "'cpu'",
        "threads": repr(torch.get_num_threads()), "noise_multiplier": "1.5", "clip_norm": "0.5", "network.depth": "28",
        "train.steps": "4", "augment.ops": "0"}
    assert set(base) == {"target", "seed", "data", "code", "arithmetic", "threads", "noise_multiplier", "clip_norm",
                         "network.depth", "network.width", *(f"train.{f.name}" for f in dataclasses.fields(TrainSpec)),
                         *(f"augment.{f.name}" for f in dataclasses.fields(AugmentSpec))}
    changes = {"target": ("other",), "seed": (4,), "data": ("digest-2",), "code": ("code-2",),
               "spec": (spec(steps=5), "train.steps"), "augment": (AugmentSpec(1, False, 0, 0), "augment.padding"),
               "network": ({"depth": 16, "width": 2}, "network.depth")}
    for name, (value, *entry) in changes.items():
        changed = checkpoint_fingerprint(**(args | {name: value}), noise_multiplier=1.5, clip_norm=0.5)
        assert differing(base, changed) == [entry[0] if entry else name], name
    assert differing(base, checkpoint_fingerprint(**args, noise_multiplier=2.0, clip_norm=0.5)) == ["noise_multiplier"]
