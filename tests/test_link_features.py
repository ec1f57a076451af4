"""Pair features of the link-stealing attacks against scipy and direct formulas."""

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.spatial import distance as sd

from privssl.graphs.link_features import (
    ATTACK_FEATURES,
    BLOCKS,
    DISTANCES,
    OPERATIONS,
    entropy,
    feature_block,
    feature_matrix,
    pair_distances,
    pair_operations,
)

SCIPY = {"cosine": sd.cosine, "euclidean": sd.euclidean, "correlation": sd.correlation, "chebyshev": sd.chebyshev,
         "braycurtis": sd.braycurtis, "manhattan": sd.cityblock, "canberra": sd.canberra,
         "sqeuclidean": sd.sqeuclidean}


def random_pairs(n_nodes, n_pairs, generator):
    pairs = torch.randint(0, n_nodes, (n_pairs, 2), generator=generator)
    return pairs[pairs[:, 0] != pairs[:, 1]]


@pytest.mark.parametrize("kind", ["posteriors", "signed", "sparse_binary"])
def test_distances_match_scipy(kind):
    g = torch.Generator().manual_seed(0)
    n, dim = 30, 6
    if kind == "posteriors":
        x = torch.softmax(3 * torch.randn(n, dim, generator=g, dtype=torch.float64), -1)
    elif kind == "signed":
        x = torch.randn(n, dim, generator=g, dtype=torch.float64)
    else:  # like citation attributes: 0/1, many coordinates 0 in both vectors (canberra's 0/0 terms)
        x = (torch.rand(n, 40, generator=g) < 0.15).double()
        x[torch.arange(n), torch.randint(0, 40, (n,), generator=g)] = 1.0  # no zero row: scipy gives NaN there
    pairs = random_pairs(n, 80, g)
    ours = pair_distances(x, pairs).numpy()
    assert ours.shape == (len(pairs), len(DISTANCES))
    xs = x.numpy()
    for k, name in enumerate(DISTANCES):
        expected = [SCIPY[name](xs[u], xs[v]) for u, v in pairs.tolist()]
        np.testing.assert_allclose(ours[:, k], expected, rtol=1e-12, atol=1e-14, err_msg=name)


def test_undefined_distances_take_their_limits():
    zero, a, const = [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 2.0, 0.0], [0.5, 0.5, 0.5, 0.5]
    x = torch.tensor([zero, zero, a, const], dtype=torch.float64)
    pairs = torch.tensor([[0, 1], [0, 2], [3, 2]])
    d = dict(zip(DISTANCES, pair_distances(x, pairs).T.numpy()))
    # canberra: 0/0 terms count 0, exactly as scipy
    np.testing.assert_allclose(d["canberra"], [sd.canberra(zero, zero), sd.canberra(zero, a), sd.canberra(const, a)])
    assert d["canberra"][0] == 0.0
    # braycurtis: two zero vectors are identical (scipy: NaN); one zero vector is defined
    assert d["braycurtis"][0] == 0.0 and d["braycurtis"][1] == pytest.approx(sd.braycurtis(zero, a)) == 1.0
    # cosine with a zero vector, correlation with a constant vector: similarity 0 (scipy: NaN)
    assert d["cosine"][:2].tolist() == [1.0, 1.0]
    assert d["correlation"].tolist() == [1.0, 1.0, 1.0]
    assert d["cosine"][2] == pytest.approx(sd.cosine(const, a))
    assert not np.isnan(np.stack(list(d.values()))).any()


def test_near_identical_posteriors_keep_their_ranking():
    """Linked nodes' correlation distances are tiny; float32 arithmetic would collapse them to 0."""
    base = torch.tensor([0.7, 0.2, 0.05, 0.05], dtype=torch.float64)
    x = torch.stack([base, base + torch.tensor([1e-5, -1e-5, 0, 0]), base + torch.tensor([2e-5, -2e-5, 0, 0])])
    corr = pair_distances(x.float(), torch.tensor([[0, 1], [0, 2]]))[:, DISTANCES.index("correlation")]
    assert 0 < corr[0] < corr[1]


def test_operations_match_formulas():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(12, 5, generator=g, dtype=torch.float64)
    pairs = random_pairs(12, 40, g)
    a, b = x[pairs[:, 0]].numpy(), x[pairs[:, 1]].numpy()
    ours = pair_operations(x, pairs).numpy()
    expected = {"average": (a + b) / 2, "hadamard": a * b, "weighted_l1": np.abs(a - b), "weighted_l2": (a - b) ** 2}
    for k, name in enumerate(OPERATIONS):
        np.testing.assert_allclose(ours[:, 5 * k:5 * (k + 1)], expected[name], rtol=1e-14, err_msg=name)
    assert pair_operations(x, pairs, dtype=torch.float32).dtype == torch.float32


def test_features_are_symmetric_in_the_pair():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(10, 4, generator=g)
    pairs = random_pairs(10, 30, g)
    swapped = pairs.flip(1)
    torch.testing.assert_close(pair_distances(x, pairs), pair_distances(x, swapped), rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(pair_operations(x, pairs), pair_operations(x, swapped), rtol=0, atol=0)


def test_entropy_matches_scipy():
    g = torch.Generator().manual_seed(3)
    p = torch.softmax(2 * torch.randn(20, 7, generator=g, dtype=torch.float64), -1)
    p[0] = torch.tensor([1.0, 0, 0, 0, 0, 0, 0])  # 0 log 0 = 0
    p[1] = torch.tensor([0.5, 0.5, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(entropy(p).numpy(), stats.entropy(p.numpy(), axis=1), rtol=1e-12, atol=1e-15)
    assert entropy(p)[0] == 0.0


def test_chunks_and_release_dimensions_do_not_change_values():
    g = torch.Generator().manual_seed(4)
    x = torch.softmax(torch.randn(3, 25, 6, generator=g), -1)  # 3 releases
    pairs = random_pairs(25, 70, g)
    whole = pair_distances(x, pairs)
    assert whole.shape == (3, len(pairs), 8)
    torch.testing.assert_close(pair_distances(x, pairs, chunk_elements=7), whole, rtol=0, atol=0)
    for release in range(3):
        torch.testing.assert_close(pair_distances(x[release], pairs), whole[release], rtol=0, atol=0)
        torch.testing.assert_close(pair_operations(x[release], pairs),
                                   pair_operations(x, pairs, chunk_elements=5)[release], rtol=0, atol=0)


def test_feature_widths_follow_table_5_2():
    g = torch.Generator().manual_seed(5)

    def widths(n_classes, n_attributes):
        f = torch.softmax(torch.randn(15, n_classes, generator=g), -1)
        gref = torch.softmax(torch.randn(15, n_classes, generator=g), -1)
        attributes = torch.rand(15, n_attributes, generator=g)
        pairs = random_pairs(15, 20, g)
        return {attack: feature_matrix(blocks, pairs, f, gref, attributes).shape[-1]
                for attack, blocks in ATTACK_FEATURES.items()}

    small, large = widths(3, 5), widths(7, 11)
    assert small["attack-1"] == 8 + 4
    assert small["attack-3"] == 8 + 4 * 3 + 4
    assert small["attack-5"] == 8 + 4 + 8 + 4 + 8
    assert small["attack-6"] == (8 + 4 * 3 + 4) * 2 + 8 + 4 * 5
    # transferring attacks: the width must not depend on the graph ("dimension mismatch")
    for attack in ("attack-1", "attack-4", "attack-5", "attack-7"):
        assert small[attack] == large[attack]
    assert small["attack-3"] != large["attack-3"]


def test_feature_matrix_shares_blocks_across_releases_and_needs_its_knowledge():
    g = torch.Generator().manual_seed(6)
    f = torch.softmax(torch.randn(2, 10, 3, generator=g), -1)
    gref = torch.softmax(torch.randn(10, 3, generator=g), -1)
    attributes = torch.rand(10, 4, generator=g)
    pairs = random_pairs(10, 12, g)
    x = feature_matrix(ATTACK_FEATURES["attack-5"], pairs, f, gref, attributes)
    assert x.shape == (2, len(pairs), 32) and x.dtype == torch.float32
    torch.testing.assert_close(x[0, :, 12:], x[1, :, 12:])  # g and F blocks are the same in every release
    assert not torch.equal(x[0, :, :12], x[1, :, :12])
    expected = pair_distances(attributes, pairs).float()
    torch.testing.assert_close(x[0, :, -8:], expected)
    with pytest.raises(ValueError, match="attributes"):
        feature_block("d(F)", pairs, {"posteriors": f[0]})
    assert set(BLOCKS) == set(ATTACK_FEATURES["attack-6"])
