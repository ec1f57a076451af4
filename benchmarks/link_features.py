#!/usr/bin/env python
"""Benchmark: vectorised link-stealing pair features against a per-pair scipy loop.

Workload: every attack pair of Cora (all 5278 undirected edges and as many non-edges, 10556
pairs): the 8 distances and 4 operations on 7-class posteriors plus the 4 operations on their
entropies (Attack-3's features), and the 8 distances on the 1433-dim attributes (Attack-2/5/6).
Cora comes from the offline copy under --data-root (copied to a temporary folder: PyG writes
processed/ beside raw/); without it, a synthetic graph of Cora's size and sparsity stands in.
Posteriors are random softmax vectors: the cost does not depend on their values.

The baseline computes the same features one pair at a time with scipy.spatial.distance, as the
authors' code does; it is timed on --baseline-pairs pairs and scaled to all pairs (every pair
costs the same). Times are medians of --repeats runs in this one process.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from scipy.spatial import distance as sd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.graphs.link_features import entropy, pair_distances, pair_operations  # noqa: E402
from privssl.graphs.link_pairs import attack_dataset, sample_non_edges  # noqa: E402

SCIPY_DISTANCES = (sd.cosine, sd.euclidean, sd.correlation, sd.chebyshev, sd.braycurtis, sd.cityblock, sd.canberra,
                   sd.sqeuclidean)
N_CLASSES = 7


def load_cora(data_root: Path):
    """(attributes, edge_index, description) of Cora, or of a synthetic graph of its size."""
    raw = data_root / "planetoid" / "Cora" / "raw"
    if raw.is_dir():
        from torch_geometric.datasets import Planetoid

        scratch = Path(tempfile.mkdtemp(prefix="privssl-bench-cora-"))
        try:
            shutil.copytree(raw, scratch / "Cora" / "raw")
            data = Planetoid(str(scratch), "Cora")[0]
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return data.x, data.edge_index, f"Cora from {raw}"
    from torch_geometric.utils import to_undirected

    g = torch.Generator().manual_seed(0)
    n, dim = 2708, 1433
    x = (torch.rand(n, dim, generator=g) < 18 / dim).float()  # Cora: 18 words per paper on average
    codes = sample_non_edges(torch.empty(0, dtype=torch.long), n, 5278, g)  # 5278 distinct random pairs
    edge_index = to_undirected(torch.stack([codes // n, codes % n]))
    return x, edge_index, f"synthetic graph of Cora's size ({raw} not found)"


def posterior_features(posteriors, pairs):
    """Attack-3's features d(f), Ψ(f), Ψ(e(f)) for all pairs at once."""
    return torch.cat([pair_distances(posteriors, pairs), pair_operations(posteriors, pairs),
                      pair_operations(entropy(posteriors).unsqueeze(-1), pairs)], -1)


def vectorised(posteriors, attributes, pairs):
    """Attack-3's posterior features and the attribute distances d(F), all pairs at once."""
    return torch.cat([posterior_features(posteriors, pairs), pair_distances(attributes, pairs)], -1)


def per_pair_loop(posteriors, attributes, pairs):
    """The same features, one pair at a time with scipy."""
    rows = []
    for u, v in pairs.tolist():
        a, b, fa, fb = posteriors[u], posteriors[v], attributes[u], attributes[v]
        ea, eb = np.array([stats.entropy(a)]), np.array([stats.entropy(b)])
        rows.append(np.concatenate([
            [d(a, b) for d in SCIPY_DISTANCES],
            (a + b) / 2, a * b, np.abs(a - b), (a - b) ** 2,
            (ea + eb) / 2, ea * eb, np.abs(ea - eb), (ea - eb) ** 2,
            [d(fa, fb) for d in SCIPY_DISTANCES]]))
    return np.array(rows)


def timed(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"),
                        help="folder holding planetoid/Cora/raw (PyG layout)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-pairs", type=int, default=500, help="pairs the scipy loop is timed on")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    attributes, edge_index, what = load_cora(Path(args.data_root))
    n = attributes.shape[0]
    pairs = attack_dataset(edge_index, n, seed=0).pairs
    posteriors = torch.softmax(2 * torch.randn(n, N_CLASSES, generator=torch.Generator().manual_seed(1),
                                               dtype=torch.float64), -1)  # exact sums: scipy renormalises
    sample = pairs[torch.randperm(len(pairs), generator=torch.Generator().manual_seed(2))[:args.baseline_pairs]]
    print(f"{what}; {len(pairs)} attack pairs; {attributes.shape[1]}-dim attributes, {N_CLASSES}-class posteriors; "
          f"{torch.get_num_threads()} threads; median of {args.repeats} runs")

    ours_t, ours_all, features = timed(lambda: vectorised(posteriors, attributes, pairs), args.repeats)
    post_t, _, _ = timed(lambda: posterior_features(posteriors, pairs), args.repeats)
    loop_t, loop_all, loop_features = timed(
        lambda: per_pair_loop(posteriors.numpy(), attributes.double().numpy(), sample), args.repeats)
    loop_scaled = loop_t * len(pairs) / len(sample)

    # agreement on the sample, where scipy is defined (it gives NaN for zero attribute vectors)
    ours_sample = vectorised(posteriors, attributes, sample).numpy()
    defined = ~np.isnan(loop_features)
    diff = np.abs(ours_sample[defined] - loop_features[defined]).max()

    print(f"vectorised, all features:     {ours_t:8.3f} s = {len(pairs) / ours_t:12,.0f} pairs/s  "
          f"(runs {', '.join(f'{t:.3f}' for t in ours_all)}); {features.shape[1]} features per pair")
    print(f"  of which posterior features: {post_t:8.3f} s = {len(pairs) / post_t:12,.0f} pairs/s")
    print(f"scipy loop, all features:     {loop_scaled:8.3f} s = {len(pairs) / loop_scaled:12,.0f} pairs/s  "
          f"(runs on {len(sample)} pairs: {', '.join(f'{t:.3f}' for t in loop_all)}; scaled by "
          f"{len(pairs)}/{len(sample)})")
    print(f"speed-up loop / vectorised: {loop_scaled / ours_t:.1f}x")
    print(f"max |vectorised - scipy| on the {len(sample)} sampled pairs: {diff:.3g}")


if __name__ == "__main__":
    main()
