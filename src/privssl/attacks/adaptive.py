"""The attacker's heads released the victim's way: adaptive attacks.

The mechanism is public, and so is its calibration (the noise scale of every ε is in the
release file), so an attacker who trains shadow heads can release them through the same
mechanism at the same ε and learn what a *released* member looks like. A non-adaptive attacker
fits its attack on clean shadow heads and is then surprised by the noise; keeping both shows how
much of a "defence" is only the attacker's mismatch.

- output perturbation: the clean heads plus the method's unit noise times the victim's scale
  at each ε (`protect` rule, key `noise_scale`), one fresh draw per head;
- DP-SGD: every head trained privately with the victim's noise multiplier at each ε
  (`dpsgd_batched`, the same algorithm as the victim's Opacus training).
"""

from __future__ import annotations

from typing import Callable

import torch

from privssl.io import Progress
from privssl.release.certified import CertifiedSpec, fit_certified_head
from privssl.release.dpsgd_batched import train_dpsgd_heads
from privssl.release.dpsgd_spec import DPSGDSpec
from privssl.release.methods import release_method
from privssl.release.protection import add_noise
from privssl.training.heads import DTYPE, HeadSpec, flatten, train_heads_on_sets

CHUNK_ELEMENTS = 2 ** 22  # float64 elements of one chunk's gathered features (32 MiB)
MAX_CHUNK = 256


def heads_per_chunk(set_size: int, width: int) -> int:
    """Heads trained together: as many as keep chunk × |d| × width within CHUNK_ELEMENTS. Small
    heads gain from batching (per-step overhead shared); large ones do not, and a chunk that
    outgrows the caches is slower than a loop (benchmarks/lira.py --paper)."""
    return max(1, min(MAX_CHUNK, CHUNK_ELEMENTS // (set_size * width)))


def train_clean_heads(head: str, features: torch.Tensor, labels: torch.Tensor, sets: torch.Tensor,
                      n_classes: int, head_spec: HeadSpec | None = None,
                      certified_spec: CertifiedSpec | None = None,
                      log: Callable[[str], None] | None = None) -> torch.Tensor:
    """Flat heads (B, P) trained by the victim's algorithm for `head` ("finetune": A_S, batched;
    "certified": the certified learner, one convex solve per set) on rows features[sets[b]];
    `log` gets their progress (per epoch of a chunk, or per certified head)."""
    if head == "finetune":
        chunk = heads_per_chunk(sets.shape[1], max(features.shape[1], head_spec.hidden))
        starts = range(0, sets.shape[0], chunk)
        progress = None if log is None else Progress(log, f"{len(sets)} heads in {len(starts)} chunks, epochs",
                                                     len(starts) * head_spec.epochs).advance
        parts = [flatten(train_heads_on_sets(head_spec, features, labels, sets[i:i + chunk], n_classes, progress))
                 for i in starts]
        return torch.cat(parts)
    if head == "certified":
        progress = Progress(log or (lambda _: None), "certified heads", len(sets))
        heads = []
        for s in sets:
            heads.append(flatten(fit_certified_head(features[s], labels[s], n_classes, certified_spec).params))
            progress.advance()
        return torch.cat(heads)
    raise ValueError(f"no clean head of kind {head!r}; allowed: finetune, certified")


def head_kind(method: str) -> str:
    """The clean head a release of `method` starts from (`none`: the fine-tuned head, unreleased)."""
    return "finetune" if method == "none" else release_method(method).head


def release_like_victim(method: str, release: dict | None, features: torch.Tensor, labels: torch.Tensor,
                        sets: torch.Tensor, n_classes: int, head_spec: HeadSpec | None, seed: int,
                        certified_spec: CertifiedSpec | None = None, trained: dict[str, torch.Tensor] | None = None,
                        log: Callable[[str], None] | None = None) -> torch.Tensor:
    """(E, B, P): a head trained on features[sets[b]] for every set, released the way the victim
    released its own by `method` at each ε of `release` (a protect or protect_dpsgd rule's file,
    as `privssl.artefacts.image.load_release` returns it): `none` the clean head (E = 1); DP-SGD a
    private training per (ε, set) at the release's noise multipliers; output perturbation the
    clean head of the method's kind plus the method's noise at the release's scales. `trained`:
    clean heads (B, P) the caller has already, by kind (`head_kind`); a kind not given is trained
    here. The one dispatch on the kind of release for every attack and audit that imitates it."""
    kind = head_kind(method)
    if method != "none" and release_method(method).release == "dpsgd":
        return dpsgd_releases(features, labels, sets, n_classes, head_spec, release["specs"], release["noise_scale"],
                              seed, log)
    if method != "none" and release_method(method).release != "output_perturbation":
        raise ValueError(f"{method!r} is released by its own training branch ({release_method(method).release}), "
                         f"not from a head an attacker can train here")
    clean = (trained or {}).get(kind)
    if clean is None:
        clean = train_clean_heads(kind, features, labels, sets, n_classes, head_spec, certified_spec, log)
    if method == "none":
        return clean[None]
    return perturb(clean, method, release["noise_scale"], seed)


def perturb(clean: torch.Tensor, method: str, noise_scales: torch.Tensor, seed: int) -> torch.Tensor:
    """(E, B, P): every clean head (B, P) released by output-perturbation `method` at each of the
    E noise scales, a fresh unit-noise draw per (ε, head)."""
    return add_noise(clean.to(DTYPE), release_method(method).noise, torch.as_tensor(noise_scales, dtype=DTYPE),
                     torch.Generator().manual_seed(seed), draws_per_scale=True)


def dpsgd_releases(features: torch.Tensor, labels: torch.Tensor, sets: torch.Tensor, n_classes: int,
                   head_spec: HeadSpec, specs: list[DPSGDSpec], noise_multipliers: torch.Tensor,
                   seed: int, log: Callable[[str], None] | None = None) -> torch.Tensor:
    """(E, B, P): a DP-SGD head per (ε, set), ε e trained with settings specs[e] (the release's,
    tuned per ε) at noise multiplier noise_multipliers[e]; the ε's of equal settings train
    together, in chunks of heads. Chunk c of the ε-major stack draws from seed + its first index.
    `log` gets their progress, per chunk."""
    n_sets = sets.shape[0]
    sigma = torch.as_tensor(noise_multipliers, dtype=DTYPE)
    if len(specs) != len(sigma):
        raise ValueError(f"need one DP-SGD spec per noise multiplier, got {len(specs)} and {len(sigma)}")
    chunk = heads_per_chunk(sets.shape[1], max(features.shape[1], head_spec.hidden))
    # every distinct setting's ε's are chunked apart: ceil(its heads / chunk) chunks each
    n_chunks = sum(-(-specs.count(spec) * n_sets // chunk) for spec in dict.fromkeys(specs))
    progress = Progress(log or (lambda _: None), f"{len(sigma) * n_sets} DP-SGD heads, chunks", n_chunks)
    out = [None] * len(sigma)
    for spec in dict.fromkeys(specs):  # distinct settings, in order
        levels = [e for e, s in enumerate(specs) if s == spec]
        all_sets = sets.repeat(len(levels), 1)
        level_sigma = sigma[levels].repeat_interleave(n_sets)
        parts = []
        for i in range(0, len(all_sets), chunk):
            parts.append(flatten(train_dpsgd_heads(features, labels, all_sets[i:i + chunk], n_classes, head_spec,
                                                   spec, level_sigma[i:i + chunk], seed + levels[0] * n_sets + i)))
            progress.advance()
        for j, flat in enumerate(torch.cat(parts).reshape(len(levels), n_sets, -1)):
            out[levels[j]] = flat
    return torch.stack(out)
