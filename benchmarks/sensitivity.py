#!/usr/bin/env python
"""Benchmark: the batched sensitivity samplers against sequential loops of 2m trainings.

Two samplers of src/privssl/release/sensitivity.py, each timed batched (as the workflow runs it) and as
a plain loop of one `train_head` call per head, the way a direct implementation would:

- population (the workflow's default): Rubinstein & Aldà's sampler, m pairs of data sets of size
  |d| drawn from the public reference pool, Δ̂1 the k-th smallest of the m distances.
  Batched: `population_sensitivity` (chunks of `chunk_size` pairs through `train_heads_on_sets`).
  Sequential: 2m `train_head` calls on pool[sets[k, j]], the sets of `population_pairs`.
- paper: the seed paper's Algorithm 2 inside d, heads on d∖{d_i} and d∖{d_j}.
  Batched: `pair_distances` (masks over the shared features through `train_heads`).
  Sequential: 2m `train_head` calls on d∖{d_r}.

Scales:
- default: the default config (config.yaml): |d| = 150 and a reference pool of 300 (its digits
  splits), features of width 128, m = 150, ρ = 0.1, γ = 0.2, and its head (MLP, 128 hidden,
  full-batch Adam, lr 0.01, the config's epochs). The features are results/digits/finetune/features.pt
  when it exists (`snakemake results/digits/finetune/features.pt`); otherwise a stand-in of the
  same shapes: scikit-learn's bundled 8×8 digits (offline) through a fixed random ReLU
  projection to 128 dimensions, split into disjoint d and pool of the config's sizes.
- --paper: m = 500, |d| = 10000 on 10000 × 128 synthetic features (10 classes); the population
  sampler draws from a synthetic pool of --pool-size (default 20000 = 2|d|) records of the same
  distribution. The sequential loops are timed on --sequential-pairs pairs (default 5) and
  scaled to m (every pair costs the same two trainings); the output says so. At this scale the
  batched samplers perform ~7e11 float64 FLOPs per epoch each (4.4e14 for 600 epochs: hours
  on 2 CPU cores).

Times are medians of --repeats runs, all in this one process, with --threads threads (default
2); the speed-up is sequential / batched. Both ways must agree: at full scale the Δ1 of the
sequential loop (the k-th order statistic for population, the maximum for paper) must match the
batched one to --tolerance (relative); on a subset the per-pair distances are compared.

Throughput: the peak is the median time of a --matmul-size square `torch.matmul` in the head's
precision (2·s³ FLOPs) on the same device and threads, measured before and after the samplers (both sets
of runs pooled, so load that drifts during the run shows up in the spread). Each trainer's
achieved FLOP/s is its counted FLOPs (see `head_flops`) over its median time; the table prints
it as a fraction of that peak. --json PATH writes every figure.

Batched and sequential runs alternate (b, s, b, s, ...), so that load which drifts during the
benchmark weighs on both. On a machine shared with other work, OpenMP's default spin-waiting
makes 2 threads collapse on small operations (the sequential loop's steps slowed ~10× in one
test); `OMP_WAIT_POLICY=PASSIVE` in the environment avoids that. The header prints the policy
and the load average, both of which bear on the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.io import pick_device  # noqa: E402
from privssl.release.random_dp import order_statistic_index  # noqa: E402
from privssl.release.sensitivity import (  # noqa: E402
    PopulationSampler,
    leave_one_out_masks,
    pair_distances,
    population_pairs,
    population_sensitivity,
    sample_pairs,
)
from privssl.training.heads import DTYPE, HeadSpec, flatten, train_head  # noqa: E402

# ---------------------------------------------------------------- FLOP count

def head_flops(spec: HeadSpec, rows: int, in_dim: int, n_classes: int) -> int:
    """Multiply-add FLOPs (2 per multiply-add) of one head over `rows` rows in one epoch, forward
    and backward; matrix products only (bias adds, ReLU, softmax/cross-entropy and the Adam
    update are O(rows·H + P) and left out, so the count is a slight underestimate).

    MLP, F inputs, H hidden, C classes, n rows:
      forward   hidden = X W1          2·n·F·H
                logits = relu(.) W2    2·n·H·C
      backward  dW2 = hiddenᵀ dlogits  2·n·H·C
                dhidden = dlogits W2ᵀ  2·n·H·C
                dW1 = Xᵀ dhidden       2·n·F·H
                (no dX: the features do not require grad, and autograd skips that product)
      total     4·n·F·H + 6·n·H·C      (the usual "backward ≈ 2 × forward" would add 2·n·F·H
                                        for dX, which is not computed)
    Linear head: forward 2·n·F·C, backward dW = Xᵀ dlogits 2·n·F·C: total 4·n·F·C.

    Mini-batches do not change the count: every epoch passes each of the n rows once. The
    paper sampler's `train_heads` runs every head over all |d| rows and zeroes the removed one's
    loss by a mask, so its heads are counted over |d| rows, as performed.
    """
    if spec.architecture == "linear":
        return 4 * rows * in_dim * n_classes
    return 4 * rows * in_dim * spec.hidden + 6 * rows * spec.hidden * n_classes


def matmul_runs(size: int, repeats: int, device: torch.device, dtype: torch.dtype = DTYPE) -> list[float]:
    """Times of `repeats` (size × size) @ (size × size) products in `dtype`, after one warm-up."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator, dtype=dtype).to(device)
    b = torch.randn(size, size, generator=generator, dtype=dtype).to(device)
    torch.matmul(a, b)
    _, times, _ = timed(lambda: torch.matmul(a, b), repeats, device)
    return times


# ---------------------------------------------------------------- features

def digits_standin(n_d: int, n_pool: int, dim: int, seed: int) -> dict:
    """Digits-like features of the default config's shapes without the workflow: scikit-learn's
    bundled 8×8 digits, standardised, through a fixed random ReLU projection 64 → dim (a
    stand-in for the frozen encoder), split at random into disjoint d (n_d) and pool (n_pool)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.as_tensor(bunch.data, dtype=DTYPE)
    x = (x - x.mean(0)) / x.std(0).clamp(min=1e-6)
    generator = torch.Generator().manual_seed(seed)
    projection = torch.randn(x.shape[1], dim, generator=generator, dtype=DTYPE) / x.shape[1] ** 0.5
    features = torch.relu(x @ projection)
    labels = torch.as_tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=generator)
    if n_d + n_pool > len(order):
        raise ValueError(f"digits has {len(order)} images, fewer than |d| + pool = {n_d + n_pool}")
    d, pool = order[:n_d], order[n_d:n_d + n_pool]
    return {"finetune": features[d], "finetune_labels": labels[d], "reference": features[pool],
            "reference_labels": labels[pool], "n_classes": 10,
            "source": f"stand-in: sklearn digits, random ReLU projection 64->{dim}"}


def synthetic(n_d: int, n_pool: int, dim: int, n_classes: int, seed: int) -> dict:
    """The --paper features: class centres plus noise, d first (as before) and a pool after."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_classes, (n_d,), generator=generator)
    centres = torch.randn(n_classes, dim, generator=generator)
    features = centres[labels] + 2.0 * torch.randn(n_d, dim, generator=generator)
    pool_labels = torch.randint(0, n_classes, (n_pool,), generator=generator)
    pool = centres[pool_labels] + 2.0 * torch.randn(n_pool, dim, generator=generator)
    return {"finetune": features, "finetune_labels": labels, "reference": pool, "reference_labels": pool_labels,
            "n_classes": n_classes, "source": f"synthetic: {n_classes} Gaussian classes, noise sd 2"}


# ---------------------------------------------------------------- sequential baselines

def sequential_paper(spec, features, labels, n_classes, pairs):
    """Algorithm 2 as a loop: two separate trainings per sampled pair."""
    l1 = []
    for i, j in pairs.tolist():
        heads = []
        for removed in (i, j):
            keep = leave_one_out_masks(len(labels), torch.tensor([removed]))[0].bool().to(features.device)
            heads.append(flatten(train_head(spec, features[keep], labels[keep], n_classes)))
        l1.append(float((heads[0] - heads[1]).abs().sum()))
    return torch.tensor(l1, dtype=DTYPE)


def sequential_population(spec, pool, pool_labels, n_classes, sets):
    """Rubinstein & Aldà's sampler as a loop: one `train_head` per data set pool[sets[k, j]]."""
    l1 = []
    for pair in sets:
        heads = [flatten(train_head(spec, pool[rows], pool_labels[rows], n_classes))
                 for rows in pair.to(pool.device)]
        l1.append(float((heads[0] - heads[1]).abs().sum()))
    return torch.tensor(l1, dtype=DTYPE)


def timed(fn, repeats, device):
    times, result = [], None
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def timed_alternating(batched, sequential, repeats, device, label):
    """Runs batched and sequential in turn, `repeats` times each, so that load which drifts during
    the benchmark weighs on both alike; returns (median, runs, last result) for each."""
    b_runs, s_runs, b_res, s_res = [], [], None, None
    for r in range(repeats):
        _, b_t, b_res = timed(batched, 1, device)
        _, s_t, s_res = timed(sequential, 1, device)
        b_runs += b_t
        s_runs += s_t
        print(f"  {label} run {r + 1}/{repeats}: batched {b_t[0]:.3f} s, sequential {s_t[0]:.3f} s", flush=True)
    return (statistics.median(b_runs), b_runs, b_res), (statistics.median(s_runs), s_runs, s_res)


def compare(batched_l1: torch.Tensor, seq_l1: torch.Tensor, delta, tolerance: float) -> dict:
    """Both ways' agreement. With every pair run sequentially: Δ1 = delta(distances) of each,
    relative difference against `tolerance`; on a subset (sequential on the first pairs only) Δ1
    cannot be formed, so the per-pair distances are compared relative to their largest."""
    common = batched_l1[:len(seq_l1)]
    pair_diff = float((common - seq_l1).abs().max())
    check = {"delta1_batched": delta(batched_l1), "max_pair_l1_abs_diff": pair_diff, "tolerance_rel": tolerance}
    if len(seq_l1) == len(batched_l1):
        seq_delta = delta(seq_l1)
        rel = abs(seq_delta - check["delta1_batched"]) / max(abs(check["delta1_batched"]), 1e-300)
        check.update(delta1_sequential=seq_delta, delta1_rel_diff=rel, delta1_match=rel <= tolerance)
    else:
        rel = pair_diff / max(float(common.abs().max()), 1e-300)
        check.update(delta1_sequential=None, pairs_rel_diff=rel, delta1_match=None, pairs_match=rel <= tolerance)
    return check


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paper", action="store_true",
                        help="m = 500, |d| = 10000 on synthetic 10000 x 128 features (pool: --pool-size)")
    parser.add_argument("--samplers", default="population,paper",
                        help="comma-separated: population, paper (default: both)")
    parser.add_argument("--features", default=str(REPO / "results/digits/finetune/features.pt"),
                        help="default scale: the workflow's features; a digits stand-in when missing")
    parser.add_argument("--config", default=str(REPO / "config.yaml"), help="head and sensitivity settings")
    parser.add_argument("--m", type=int, default=None, help="override the number of pairs")
    parser.add_argument("--rho", type=float, default=None, help="override sensitivity.rho")
    parser.add_argument("--gamma", type=float, default=None, help="override sensitivity.gamma")
    parser.add_argument("--pool-size", type=int, default=None, help="--paper: synthetic pool (default 20000)")
    parser.add_argument("--head-epochs", type=int, default=None, help="override the head's epochs")
    parser.add_argument("--head-batch-size", type=int, default=None,
                        help="override the head's batch size (0: full batch)")
    parser.add_argument("--precision", choices=["float64", "float32"], default=None,
                        help="override head.precision (the peak is measured in the same precision)")
    parser.add_argument("--sequential-pairs", type=int, default=None,
                        help="pairs the sequential loops are timed on (default: all at default scale, 5 with --paper)")
    parser.add_argument("--chunk-size", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=1e-6,
                        help="largest relative |Δ1 batched - Δ1 sequential| / Δ1 batched accepted")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--matmul-repeats", type=int, default=5, help="matmul runs before and after the samplers each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args()
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if not samplers or set(samplers) - {"population", "paper"}:
        parser.error(f"--samplers takes population and/or paper, got {args.samplers!r}")
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    config = yaml.safe_load(Path(args.config).read_text())
    head_cfg = dict(config["head"])
    if args.head_epochs:
        head_cfg["epochs"] = args.head_epochs
    if args.precision:
        head_cfg["precision"] = args.precision
    if args.head_batch_size is not None:
        head_cfg["batch_size"] = args.head_batch_size or None
    spec = HeadSpec.from_config(head_cfg)
    sens = config["sensitivity"]
    chunk = args.chunk_size or sens["chunk_size"]
    rho = sens["rho"] if args.rho is None else args.rho
    gamma = sens["gamma"] if args.gamma is None else args.gamma

    if args.paper:
        n_d = 10000
        feats = synthetic(n_d, args.pool_size or 2 * n_d, 128, 10, args.seed)
        m = args.m or 500
        seq_pairs = args.sequential_pairs or 5
        scale = "paper"
    else:
        if Path(args.features).exists():
            feats = torch.load(args.features, map_location="cpu", weights_only=True)
            feats["source"] = args.features
        else:
            splits = config["datasets"]["digits"]["splits"]
            feats = digits_standin(splits["finetune"], splits["reference"], 128, args.seed)
        m = args.m or sens["m"]
        seq_pairs = args.sequential_pairs or m
        scale = "default"
    seq_pairs = min(seq_pairs, m)
    n_classes = int(feats["n_classes"])
    d, d_labels = feats["finetune"].to(device, spec.dtype), feats["finetune_labels"].to(device)
    pool, pool_labels = feats["reference"].to(device, spec.dtype), feats["reference_labels"].to(device)
    n, dim = d.shape
    k = order_statistic_index(m, rho, gamma) if "population" in samplers else None
    if "population" in samplers and pool.shape[0] < 2:
        sys.exit("the reference pool needs at least 2 records")

    load_before = os.getloadavg()
    wait_policy = os.environ.get("OMP_WAIT_POLICY", "default")
    print(f"device {device}, {torch.get_num_threads()} threads (OMP_WAIT_POLICY {wait_policy}), "
          f"torch {torch.__version__}; load average {load_before[0]:.2f} (1 min) at start")
    print(f"{scale} scale; features: {feats['source']}; |d| = {n}, pool = {pool.shape[0]}, width {dim}, "
          f"{n_classes} classes")
    print(f"head {spec.architecture}{f' {spec.hidden} hidden' if spec.architecture == 'mlp' else ''}, "
          f"{spec.epochs} epochs, {'full batch' if spec.batch_size is None else f'batches of {spec.batch_size}'}, "
          f"{spec.optimizer} lr {spec.lr:g}, {spec.precision}; m = {m}" + (f", rho = {rho:g}, gamma = {gamma:g}, k = {k}" if k else "")
          + f"; chunks of {chunk} pairs; medians of {args.repeats} runs", flush=True)

    peak_runs = matmul_runs(args.matmul_size, args.matmul_repeats, device, spec.dtype)
    results: dict[str, dict] = {}

    def record(name, batched, sequential, heads_batched, rows_batched, heads_seq, rows_seq, check):
        b_t, b_all = batched
        s_t, s_all = sequential
        s_scaled = s_t * m / seq_pairs
        flops_b = heads_batched * spec.epochs * head_flops(spec, rows_batched, dim, n_classes)
        flops_s = heads_seq * spec.epochs * head_flops(spec, rows_seq, dim, n_classes)  # on the timed pairs
        results[name] = {
            "batched_s": b_t, "batched_runs_s": b_all,
            "sequential_s": s_scaled, "sequential_runs_s": s_all,
            "sequential_pairs_timed": seq_pairs, "sequential_scaled_to_m": seq_pairs != m,
            "speedup": s_scaled / b_t,
            "batched_heads": heads_batched, "batched_rows_per_head": rows_batched,
            "batched_flops": flops_b, "batched_flops_per_s": flops_b / b_t,
            "sequential_heads_timed": heads_seq, "sequential_flops_timed": flops_s,
            "sequential_flops_per_s": flops_s / s_t,
            **check,
        }

    if "population" in samplers:
        sets, _ = population_pairs(pool.shape[0], n, m, args.seed)
        (b_t, b_all, rec), (s_t, s_all, seq_l1) = timed_alternating(
            lambda: population_sensitivity(spec, pool, pool_labels, n_classes, n,
                                           PopulationSampler(m, rho, gamma, args.seed, chunk)),
            lambda: sequential_population(spec, pool, pool_labels, n_classes, sets[:seq_pairs]),
            args.repeats, device, "population")
        batched_l1 = torch.tensor(rec["distances_l1"], dtype=DTYPE)
        check = compare(batched_l1, seq_l1, lambda l1: float(l1.sort().values[k - 1]), args.tolerance)
        check.update(k=k, rho=rho, gamma=gamma, delta1_library=rec["delta1"])
        record("population", (b_t, b_all), (s_t, s_all), 2 * m, n, 2 * seq_pairs, n, check)

    if "paper" in samplers:
        pairs = sample_pairs(n, m, seed=args.seed)
        distinct = len(torch.unique(pairs))  # heads the batched sampler trains (one per distinct r)
        (b_t, b_all, (l1, _)), (s_t, s_all, seq_l1) = timed_alternating(
            lambda: pair_distances(spec, d, d_labels, n_classes, pairs, chunk),
            lambda: sequential_paper(spec, d, d_labels, n_classes, pairs[:seq_pairs]),
            args.repeats, device, "paper")
        check = compare(l1.to(DTYPE), seq_l1, lambda l1: float(l1.max()), args.tolerance)
        # batched: one head per distinct removed index over all n rows (masked); sequential: 2 per pair, n - 1 rows
        record("paper", (b_t, b_all), (s_t, s_all), distinct, n, 2 * seq_pairs, n - 1, check)

    peak_runs += matmul_runs(args.matmul_size, args.matmul_repeats, device, spec.dtype)
    peak_t = statistics.median(peak_runs)
    peak = 2 * args.matmul_size ** 3 / peak_t
    load_after = os.getloadavg()

    # ---------------------------------------------------------------- report
    print()
    print(f"{spec.precision} matmul {args.matmul_size}x{args.matmul_size}: median {peak_t * 1e3:.1f} ms of "
          f"{len(peak_runs)} runs (range {min(peak_runs) * 1e3:.1f}-{max(peak_runs) * 1e3:.1f} ms) "
          f"-> peak {peak / 1e9:.2f} GFLOP/s")
    header = (f"{'sampler':<11} {'trainer':<11} {'heads':>6} {'rows':>6} {'median s':>10} {'runs s':<27} "
              f"{'TFLOP':>8} {'GFLOP/s':>8} {'of peak':>8}")
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        for way in ("batched", "sequential"):
            if way == "batched":
                heads, rows = r["batched_heads"], r["batched_rows_per_head"]
                t, runs = r["batched_s"], r["batched_runs_s"]
                flops, rate = r["batched_flops"], r["batched_flops_per_s"]
            else:
                heads = r["sequential_heads_timed"]
                rows = n - 1 if name == "paper" else n
                t, runs = r["sequential_s"], r["sequential_runs_s"]
                flops, rate = r["sequential_flops_timed"], r["sequential_flops_per_s"]
            star = "*" if way == "sequential" and r["sequential_scaled_to_m"] else ""
            print(f"{name:<11} {way:<11} {heads:>6} {rows:>6} {t:>9.3f}{star:1} "
                  f"{', '.join(f'{x:.2f}' for x in runs):<27} {flops / 1e12:>8.3f} {rate / 1e9:>8.2f} "
                  f"{100 * rate / peak:>7.1f}%")
    if any(r["sequential_scaled_to_m"] for r in results.values()):
        print(f"* timed on {seq_pairs} pairs (runs and TFLOP are those) and scaled by {m}/{seq_pairs}")
    print()
    for name, r in results.items():
        print(f"{name}: speed-up sequential / batched {r['speedup']:.2f}x")
        what = f"order statistic k = {r['k']} of {m}" if name == "population" else f"the maximum of {m}"
        if r["delta1_match"] is not None:
            print(f"  Δ1 ({what}): batched {r['delta1_batched']:.10g}, sequential {r['delta1_sequential']:.10g}, "
                  f"relative difference {r['delta1_rel_diff']:.3g} (tolerance {args.tolerance:g}): "
                  f"{'match' if r['delta1_match'] else 'MISMATCH'}")
        else:
            print(f"  Δ1 ({what}): batched {r['delta1_batched']:.10g}; sequential on {seq_pairs} pairs only: per-pair "
                  f"relative difference {r['pairs_rel_diff']:.3g} (tolerance {args.tolerance:g}): "
                  f"{'match' if r['pairs_match'] else 'MISMATCH'}")
        print(f"  max per-pair |l1 batched - l1 sequential| over {seq_pairs} pairs: {r['max_pair_l1_abs_diff']:.3g}")
    print(f"load average {load_after[0]:.2f} (1 min) at the end; other processes on the machine inflate the times")

    if args.json:
        out = {
            "scale": scale, "device": str(device), "threads": torch.get_num_threads(),
            "omp_wait_policy": wait_policy, "torch": torch.__version__,
            "features": feats["source"], "finetune_size": n, "pool_size": int(pool.shape[0]), "feature_dim": dim,
            "n_classes": n_classes, "m": m, "chunk_size": chunk, "repeats": args.repeats, "head": spec.__dict__,
            "flop_count": "per head and epoch: MLP 4nFH + 6nHC, linear 4nFC (matrix products, forward + backward, "
                          "no input gradient)",
            "matmul": {"size": args.matmul_size, "runs_s": peak_runs, "median_s": peak_t, "peak_flops_per_s": peak},
            "load_average_1min": {"start": load_before[0], "end": load_after[0]},
            "samplers": {name: {**r, "batched_fraction_of_peak": r["batched_flops_per_s"] / peak,
                                "sequential_fraction_of_peak": r["sequential_flops_per_s"] / peak}
                         for name, r in results.items()},
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    if any(r["delta1_match"] is False or r.get("pairs_match") is False for r in results.values()):
        sys.exit("batched and sequential Δ1 disagree beyond the tolerance")


if __name__ == "__main__":
    main()
