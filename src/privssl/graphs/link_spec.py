"""Names of the link-stealing attacks' rows (thesis Ch. 5, He et al. 2021): the distances and
the adversary's information (torch-free: the link tables' declared rows, privssl.artefacts.graphs, name
them before any job). One owner for what the attack rules write and the readers expect."""

DISTANCES = ("cosine", "euclidean", "correlation", "chebyshev", "braycurtis", "manhattan", "canberra", "sqeuclidean")
ATTACK_2_INFORMATION = ("posteriors", "attributes", "posteriors-reference", "reference")
ALL_INFORMATION = "posteriors+reference+attributes"  # the feature set of Attack-5, 6 and 7
