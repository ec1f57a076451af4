#!/usr/bin/env python
"""Benchmark: the LiRA shadow and target heads, one batched training against a sequential loop.

The `lira_heads` rule trains N shadow + T target heads by A_S, each on its own |d| records of
the candidate pool, as one batched computation (`adaptive.train_clean_heads`: chunks of heads
through `heads.train_heads_on_sets`). The baseline is the direct implementation: one
`train_head` call per head. Then the attack itself is timed: LiRA online scores of every target
on every candidate (`lira.lira_scores`) and the metrics with intervals (`privssl.attacks.statistics`).

Scales:
- default: the default config's head (config.yaml), |d| = 150, a pool of 2|d| = 300 (d and the
  non-members), 64 shadows + 16 targets. Features: results/digits/finetune/features.pt when it
  exists, else the digits stand-in of benchmarks/sensitivity.py (same shapes).
- --paper: 10000 × 128 synthetic features, 10 classes, heads on |d| = 5000 (halves), 256
  shadows + 16 targets. The config's epoch count would take hours on 2 CPU cores, so both ways run
  --paper-epochs epochs (default 2) and the sequential loop runs --sequential-heads heads (default
  4), scaled to all heads (every head costs the same); the output says so, and both are also
  extrapolated to the config's epochs (time is linear in epochs).

Batched and sequential runs alternate, --repeats times each (medians reported, all runs printed),
in one process with --threads threads. Both ways must agree: the largest difference of a head's
parameters is printed and must be below --tolerance. OMP_WAIT_POLICY=PASSIVE is advisable on a
shared machine (see benchmarks/sensitivity.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from sensitivity import digits_standin, synthetic, timed, timed_alternating  # noqa: E402

from privssl.attacks.adaptive import train_clean_heads  # noqa: E402
from privssl.attacks.lira import draw_training_sets, lira_scores, logit_confidence, membership  # noqa: E402
from privssl.attacks.statistics import membership_metrics  # noqa: E402
from privssl.io import pick_device  # noqa: E402
from privssl.training.heads import HeadSpec, flatten, head_logits, parameter_shapes, train_head, unflatten  # noqa: E402


def default_pool(n_d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, int, str]:
    path = REPO / "results" / "digits" / "finetune" / "features.pt"
    if path.exists():
        feats = torch.load(path, weights_only=True)
        return (torch.cat([feats["finetune"], feats["nonmember"]]).double(),
                torch.cat([feats["finetune_labels"], feats["nonmember_labels"]]), int(feats["n_classes"]), str(path))
    standin = digits_standin(n_d, n_d, 128, seed)
    return (torch.cat([standin["finetune"], standin["reference"]]),
            torch.cat([standin["finetune_labels"], standin["reference_labels"]]), 10, standin["source"])


def attack_time(spec, x, y, n_classes, flat, sets, shadows, device, repeats):
    """Median time of LiRA online scoring of every target on every candidate plus its metrics."""
    shapes = parameter_shapes(spec, x.shape[1], n_classes)
    inside = membership(sets.cpu(), len(y))

    def run():
        phi = logit_confidence(head_logits(unflatten(flat, shapes), x), y).cpu()
        scores = lira_scores(phi[shadows:], phi[:shadows], inside[:shadows])
        return membership_metrics(scores.reshape(-1).numpy(), inside[shadows:].reshape(-1).numpy(), 0.0)

    return timed(run, repeats, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paper", action="store_true", help="10000 × 128 synthetic features, 256 shadows")
    parser.add_argument("--shadows", type=int, default=None, help="default 64, --paper 256")
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--paper-epochs", type=int, default=2)
    parser.add_argument("--sequential-heads", type=int, default=4, help="--paper: heads of the sequential loop")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=1e-8)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    spec = HeadSpec.from_config(config["head"])
    config_epochs = spec.epochs
    shadows = args.shadows or (256 if args.paper else 64)
    if args.paper:
        data = synthetic(10000, 0, 128, 10, args.seed)
        x, y, n_classes, source = data["finetune"].double(), data["finetune_labels"], 10, data["source"]
        spec = HeadSpec(**{**spec.__dict__, "epochs": args.paper_epochs})
        n_sequential = min(args.sequential_heads, shadows + args.targets)
    else:
        x, y, n_classes, source = default_pool(config["datasets"]["digits"]["splits"]["finetune"], args.seed)
        n_sequential = shadows + args.targets
    x, y = x.to(device), y.to(device)
    heads = shadows + args.targets
    sets = draw_training_sets(len(y), len(y) // 2, heads, args.seed).to(device)
    print(f"device {device}, {args.threads} threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"features: {source}; pool {len(y)} × {x.shape[1]}, {n_classes} classes; {shadows} shadows + "
          f"{args.targets} targets on |d| = {len(y) // 2}; head {spec.architecture} {spec.hidden} hidden, "
          f"{spec.epochs} epochs")

    def batched():
        return train_clean_heads("finetune", x, y, sets, n_classes, spec)

    def sequential():
        return torch.cat([flatten(train_head(spec, x[s], y[s], n_classes)) for s in sets[:n_sequential]])

    (b_med, b_runs, b_flat), (s_med, s_runs, s_flat) = timed_alternating(batched, sequential, args.repeats, device,
                                                                         "heads")
    difference = float((b_flat[:n_sequential] - s_flat).abs().max())
    scale = heads / n_sequential
    print(f"batched {heads} heads: median {b_med:.3f} s  (runs {', '.join(f'{t:.3f}' for t in b_runs)})")
    print(f"sequential {n_sequential} heads: median {s_med:.3f} s  (runs {', '.join(f'{t:.3f}' for t in s_runs)})"
          + (f"; scaled to {heads} heads: {s_med * scale:.3f} s" if scale != 1 else ""))
    print(f"speed-up sequential / batched: {s_med * scale / b_med:.2f}×; largest parameter difference "
          f"{difference:.2e} (tolerance {args.tolerance:g})")
    if args.paper:
        factor = config_epochs / spec.epochs
        print(f"extrapolated to the config's {config_epochs} epochs: batched {b_med * factor / 60:.1f} min, "
              f"sequential {s_med * scale * factor / 60:.1f} min")
    a_med, a_runs, metrics = attack_time(spec, x, y, n_classes, b_flat, sets, shadows, device, args.repeats)
    print(f"LiRA online on {args.targets} × {len(y)} decisions + metrics with intervals: median {a_med:.3f} s "
          f"(runs {', '.join(f'{t:.3f}' for t in a_runs)}); AUC {metrics['auc']:.3f}, "
          f"TPR at 1 % FPR {metrics['tpr_at_1pct_fpr']:.3f}")
    if not difference <= args.tolerance:
        sys.exit(f"batched and sequential heads differ by {difference:.2e} > {args.tolerance:g}")


if __name__ == "__main__":
    main()
