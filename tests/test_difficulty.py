"""The difficulty-calibrated loss attack (privssl.attacks.difficulty; Watson et al., ICLR 2022):
its score against a loop over candidates and references in NumPy, its no-fit threshold through
the reference attacks' dispatch, and the point of the calibration: records of unequal difficulty,
where the plain loss attack barely sees membership and the calibrated one does."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privssl.attacks.difficulty import calibrated_loss_scores, cross_entropy
from privssl.attacks.reference_attacks import References, reference_scores


def _loss(logits: np.ndarray, label: int) -> float:
    shifted = logits - logits.max()
    return float(np.log(np.exp(shifted).sum()) - shifted[label])


def test_the_score_is_the_mean_out_reference_loss_minus_the_targets():
    g = torch.Generator().manual_seed(0)
    S, T, N, C = 5, 2, 30, 4
    references = torch.randn(S, N, C, generator=g, dtype=torch.float64)
    targets = torch.randn(T, N, C, generator=g, dtype=torch.float64)
    labels = torch.randint(0, C, (N,), generator=g)
    inside = torch.rand(S, N, generator=g) < 0.5
    inside[:, 0] = True  # candidate 0: every reference trained on it
    scores = calibrated_loss_scores(targets, references, inside, labels)
    out_losses = [_loss(references[s, n].numpy(), int(labels[n])) for s in range(S) for n in range(N)
                  if not inside[s, n]]
    for t in range(T):
        for n in range(N):
            out = [_loss(references[s, n].numpy(), int(labels[n])) for s in range(S) if not inside[s, n]]
            reference = np.mean(out) if out else np.mean(out_losses)  # no OUT reference: the mean over all
            assert float(scores[t, n]) == pytest.approx(reference - _loss(targets[t, n].numpy(), int(labels[n])))


def test_the_dispatch_says_member_where_the_loss_is_below_the_references():
    g = torch.Generator().manual_seed(1)
    logits, labels = torch.randn(7, 20, 3, generator=g), torch.randint(0, 3, (20,), generator=g)
    inside = torch.rand(4, 20, generator=g) < 0.5
    scores, threshold = reference_scores("calibrated_loss", logits[4:], None, References(logits[:4], inside), labels)
    torch.testing.assert_close(scores, calibrated_loss_scores(logits[4:], logits[:4], inside, labels))
    assert threshold == 0.0


def test_calibration_sees_membership_that_record_difficulty_hides():
    """Each record has its own difficulty (a loss level every model shares); training on it lowers
    the target's loss by 0.3. The plain loss ranks records mostly by difficulty (AUC near 0.5), the
    calibrated score by membership."""
    rng = np.random.default_rng(2)
    n, S = 2000, 16
    difficulty = rng.exponential(2.0, n)
    member = np.arange(n) < n // 2
    inside = torch.from_numpy(rng.random((S, n)) < 0.5)

    def logits_for(loss: np.ndarray) -> torch.Tensor:
        # two classes, label 0: ℓ = log(1 + e^{−m}) for margin m, so m = −log(e^ℓ − 1)
        margin = -np.log(np.expm1(np.maximum(loss, 1e-6)))
        return torch.from_numpy(np.stack([margin, np.zeros_like(margin)], -1))

    references = torch.stack([logits_for(difficulty - 0.3 * inside[s].numpy() + rng.normal(0, 0.05, n))
                              for s in range(S)])
    target = logits_for(difficulty - 0.3 * member + rng.normal(0, 0.05, n))[None]
    labels = torch.zeros(n, dtype=torch.long)
    plain = -cross_entropy(target, labels)[0].numpy()
    calibrated = calibrated_loss_scores(target, references, inside, labels)[0].numpy()
    assert roc_auc_score(member, plain) < 0.6
    assert roc_auc_score(member, calibrated) > 0.95


def test_inputs_it_cannot_calibrate_are_refused():
    logits, labels = torch.zeros(3, 5, 2), torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match="shapes disagree"):
        calibrated_loss_scores(logits[:1], logits, torch.zeros(3, 4, dtype=torch.bool), labels)
    with pytest.raises(ValueError, match="references without it"):
        calibrated_loss_scores(logits[:1], logits, torch.ones(3, 5, dtype=torch.bool), labels)
