"""The link-stealing results the thesis reports (seed 003 Ch. 5), as data for comparison tables.

Numbers are copied from the text exactly, each with the table it comes from. AUCs and
precisions / recalls are means ± standard deviations over 5 runs, stored as (mean, std).
Dataset names are the thesis's; `PROJECT_NAMES` maps the project's graph names onto them.

Not here, because the text holds them only as figures: the per-distance AUCs of Attack-0
(Figure 5.1) and the four information types of Attack-2 (Figure 5.4); the few values the prose
quotes from those figures are in ATTACK_0_QUOTED and ATTACK_2_QUOTED. The header row of
Table 5.3 is garbled in the text ("AIDS COX2 DHFR Shadow Dataset ENZYMES Dataset PROTEINS_full
..."), but each row has 8 cells with the empty diagonal where the shadow column order
AIDS, COX2, DHFR, ENZYMES, PROTEINS_full, Citeseer, Cora, Pubmed puts it, so it is read in
that order, as the other transfer tables (5.6-5.8) print it.
"""

from __future__ import annotations

DATASETS = ("AIDS", "COX2", "DHFR", "ENZYMES", "PROTEINS_full", "Citeseer", "Cora", "Pubmed")
PROJECT_NAMES = {"cora": "Cora", "citeseer": "Citeseer", "pubmed": "Pubmed", "cox2": "COX2"}

# Attack-0 with Correlation distance, hard decision by K-means (K = 2):
# dataset -> (precision, recall, F1, AUC), single values (Table 5.14).
ATTACK_0_KMEANS = {  # Table 5.14
    "AIDS": (0.524, 0.996, 0.687, 0.691),
    "COX2": (0.523, 0.987, 0.684, 0.867),
    "DHFR": (0.555, 0.977, 0.708, 0.765),
    "ENZYMES": (0.501, 1.000, 0.667, 0.630),
    "PROTEINS_full": (0.540, 0.998, 0.701, 0.815),
    "Citeseer": (0.788, 0.991, 0.878, 0.959),
    "Cora": (0.777, 0.966, 0.861, 0.929),
    "Pubmed": (0.691, 0.965, 0.806, 0.874),
}

# Attack-0 AUCs of single distances quoted in §5.4.2's prose (Figure 5.1 holds the rest).
# ENZYMES: the prose says 0.635 where Table 5.14 prints 0.630 for the same attack and distance.
ATTACK_0_QUOTED = {
    ("Citeseer", "correlation"): 0.959,
    ("Citeseer", "cosine"): 0.946,
    ("Citeseer", "canberra"): 0.801,
    ("ENZYMES", "correlation"): 0.635,
}

# Attack-2: §5.1 says "on the Citeseer dataset [...] when the adversary only has nodes'
# attributes, the AUC is 0.878" without naming the information type or distance. It is not
# Attack-2's best type: the d(f) type is Attack-0, 0.959 on Citeseer (Table 5.14).
ATTACK_2_QUOTED = {"Citeseer": 0.878}

# Supervised attacks: dataset -> AUC (mean, std); precision / recall -> ((mean, std), (mean, std)).
ATTACK_3 = {  # Table 5.5
    "AIDS": (0.961, 0.001),
    "COX2": (0.939, 0.002),
    "DHFR": (0.934, 0.001),
    "ENZYMES": (0.882, 0.001),
    "PROTEINS_full": (0.958, 0.000),
    "Citeseer": (0.973, 0.000),
    "Cora": (0.954, 0.001),
    "Pubmed": (0.947, 0.001),
}
ATTACK_6 = {  # Table 5.9
    "AIDS": (0.979, 0.001),
    "COX2": (0.987, 0.001),
    "DHFR": (0.992, 0.001),
    "ENZYMES": (0.891, 0.001),
    "PROTEINS_full": (0.999, 0.000),
    "Citeseer": (0.981, 0.000),
    "Cora": (0.964, 0.000),
    "Pubmed": (0.970, 0.000),
}
ATTACK_3_PRECISION_RECALL = {  # Table 5.17
    "AIDS": ((0.874, 0.006), (0.966, 0.005)),
    "COX2": ((0.846, 0.004), (0.922, 0.005)),
    "DHFR": ((0.847, 0.007), (0.877, 0.009)),
    "ENZYMES": ((0.761, 0.003), (0.871, 0.004)),
    "PROTEINS_full": ((0.856, 0.006), (0.943, 0.004)),
    "Citeseer": ((0.895, 0.003), (0.946, 0.005)),
    "Cora": ((0.858, 0.002), (0.917, 0.008)),
    "Pubmed": ((0.869, 0.008), (0.892, 0.014)),
}
ATTACK_6_PRECISION_RECALL = {  # Table 5.20
    "AIDS": ((0.907, 0.002), (0.986, 0.002)),
    "COX2": ((0.935, 0.004), (0.994, 0.001)),
    "DHFR": ((0.972, 0.001), (0.995, 0.002)),
    "ENZYMES": ((0.770, 0.004), (0.886, 0.009)),
    "PROTEINS_full": ((0.988, 0.002), (0.998, 0.001)),
    "Citeseer": ((0.900, 0.008), (0.933, 0.006)),
    "Cora": ((0.878, 0.003), (0.930, 0.003)),
    "Pubmed": ((0.903, 0.004), (0.920, 0.003)),
}

# Transferring attacks: target -> shadow -> AUC (mean, std).
ATTACK_1 = {  # Table 5.3
    "AIDS": {"COX2": (0.720, 0.009), "DHFR": (0.690, 0.005), "ENZYMES": (0.730, 0.010),
             "PROTEINS_full": (0.720, 0.005), "Citeseer": (0.689, 0.019), "Cora": (0.650, 0.025),
             "Pubmed": (0.667, 0.014)},
    "COX2": {"AIDS": (0.755, 0.032), "DHFR": (0.831, 0.005), "ENZYMES": (0.739, 0.116),
             "PROTEINS_full": (0.832, 0.009), "Citeseer": (0.762, 0.009), "Cora": (0.773, 0.008),
             "Pubmed": (0.722, 0.024)},
    "DHFR": {"AIDS": (0.689, 0.004), "COX2": (0.771, 0.004), "ENZYMES": (0.577, 0.044),
             "PROTEINS_full": (0.701, 0.010), "Citeseer": (0.736, 0.005), "Cora": (0.740, 0.003),
             "Pubmed": (0.663, 0.010)},
    "ENZYMES": {"AIDS": (0.747, 0.014), "COX2": (0.695, 0.023), "DHFR": (0.514, 0.041),
                "PROTEINS_full": (0.691, 0.030), "Citeseer": (0.680, 0.012), "Cora": (0.663, 0.009),
                "Pubmed": (0.637, 0.018)},
    "PROTEINS_full": {"AIDS": (0.775, 0.020), "COX2": (0.821, 0.016), "DHFR": (0.528, 0.038),
                      "ENZYMES": (0.822, 0.020), "Citeseer": (0.823, 0.004), "Cora": (0.809, 0.015),
                      "Pubmed": (0.809, 0.013)},
    "Citeseer": {"AIDS": (0.801, 0.040), "COX2": (0.920, 0.006), "DHFR": (0.842, 0.036), "ENZYMES": (0.846, 0.042),
                 "PROTEINS_full": (0.848, 0.015), "Cora": (0.965, 0.001), "Pubmed": (0.942, 0.003)},
    "Cora": {"AIDS": (0.791, 0.019), "COX2": (0.884, 0.005), "DHFR": (0.811, 0.024), "ENZYMES": (0.804, 0.048),
             "PROTEINS_full": (0.869, 0.012), "Citeseer": (0.942, 0.001), "Pubmed": (0.917, 0.002)},
    "Pubmed": {"AIDS": (0.705, 0.039), "COX2": (0.796, 0.007), "DHFR": (0.704, 0.042), "ENZYMES": (0.708, 0.067),
               "PROTEINS_full": (0.752, 0.014), "Citeseer": (0.883, 0.006), "Cora": (0.885, 0.005)},
}
ATTACK_4 = {  # Table 5.6
    "AIDS": {"COX2": (0.750, 0.009), "DHFR": (0.763, 0.010), "ENZYMES": (0.733, 0.007),
             "PROTEINS_full": (0.557, 0.009), "Citeseer": (0.729, 0.015), "Cora": (0.702, 0.010),
             "Pubmed": (0.673, 0.009)},
    "COX2": {"AIDS": (0.802, 0.031), "DHFR": (0.866, 0.004), "ENZYMES": (0.782, 0.012),
             "PROTEINS_full": (0.561, 0.030), "Citeseer": (0.860, 0.002), "Cora": (0.853, 0.004),
             "Pubmed": (0.767, 0.023)},
    "DHFR": {"AIDS": (0.758, 0.022), "COX2": (0.812, 0.005), "ENZYMES": (0.662, 0.030),
             "PROTEINS_full": (0.578, 0.067), "Citeseer": (0.799, 0.002), "Cora": (0.798, 0.009),
             "Pubmed": (0.736, 0.005)},
    "ENZYMES": {"AIDS": (0.741, 0.010), "COX2": (0.684, 0.024), "DHFR": (0.670, 0.008),
                "PROTEINS_full": (0.733, 0.019), "Citeseer": (0.624, 0.002), "Cora": (0.627, 0.014),
                "Pubmed": (0.691, 0.012)},
    "PROTEINS_full": {"AIDS": (0.715, 0.009), "COX2": (0.802, 0.025), "DHFR": (0.725, 0.041),
                      "ENZYMES": (0.863, 0.010), "Citeseer": (0.784, 0.031), "Cora": (0.815, 0.012),
                      "Pubmed": (0.867, 0.003)},
    "Citeseer": {"AIDS": (0.832, 0.078), "COX2": (0.940, 0.005), "DHFR": (0.914, 0.007), "ENZYMES": (0.879, 0.062),
                 "PROTEINS_full": (0.833, 0.088), "Cora": (0.967, 0.001), "Pubmed": (0.955, 0.003)},
    "Cora": {"AIDS": (0.572, 0.188), "COX2": (0.899, 0.003), "DHFR": (0.887, 0.014), "ENZYMES": (0.878, 0.045),
             "PROTEINS_full": (0.738, 0.168), "Citeseer": (0.945, 0.001), "Pubmed": (0.924, 0.005)},
    "Pubmed": {"AIDS": (0.777, 0.056), "COX2": (0.893, 0.001), "DHFR": (0.90, 0.006), "ENZYMES": (0.866, 0.002),
               "PROTEINS_full": (0.806, 0.042), "Citeseer": (0.907, 0.004), "Cora": (0.902, 0.001)},
}
ATTACK_5 = {  # Table 5.7
    "AIDS": {"COX2": (0.841, 0.003), "DHFR": (0.846, 0.009), "ENZYMES": (0.795, 0.016),
             "PROTEINS_full": (0.875, 0.002), "Citeseer": (0.839, 0.006), "Cora": (0.793, 0.015),
             "Pubmed": (0.787, 0.008)},
    "COX2": {"AIDS": (0.832, 0.036), "DHFR": (0.977, 0.002), "ENZYMES": (0.874, 0.020),
             "PROTEINS_full": (0.946, 0.003), "Citeseer": (0.911, 0.004), "Cora": (0.908, 0.004),
             "Pubmed": (0.887, 0.004)},
    "DHFR": {"AIDS": (0.840, 0.018), "COX2": (0.988, 0.001), "ENZYMES": (0.757, 0.032),
             "PROTEINS_full": (0.970, 0.004), "Citeseer": (0.909, 0.010), "Cora": (0.911, 0.009),
             "Pubmed": (0.860, 0.004)},
    "ENZYMES": {"AIDS": (0.639, 0.005), "COX2": (0.581, 0.010), "DHFR": (0.587, 0.005),
                "PROTEINS_full": (0.608, 0.001), "Citeseer": (0.685, 0.005), "Cora": (0.674, 0.007),
                "Pubmed": (0.663, 0.002)},
    "PROTEINS_full": {"AIDS": (0.948, 0.007), "COX2": (0.981, 0.004), "DHFR": (0.968, 0.014),
                      "ENZYMES": (0.818, 0.017), "Citeseer": (0.970, 0.002), "Cora": (0.876, 0.010),
                      "Pubmed": (0.885, 0.003)},
    "Citeseer": {"AIDS": (0.773, 0.048), "COX2": (0.666, 0.018), "DHFR": (0.652, 0.020), "ENZYMES": (0.860, 0.049),
                 "PROTEINS_full": (0.794, 0.009), "Cora": (0.969, 0.002), "Pubmed": (0.967, 0.001)},
    "Cora": {"AIDS": (0.743, 0.017), "COX2": (0.587, 0.012), "DHFR": (0.568, 0.009), "ENZYMES": (0.778, 0.052),
             "PROTEINS_full": (0.686, 0.018), "Citeseer": (0.956, 0.001), "Pubmed": (0.936, 0.002)},
    "Pubmed": {"AIDS": (0.777, 0.030), "COX2": (0.661, 0.018), "DHFR": (0.645, 0.008), "ENZYMES": (0.786, 0.041),
               "PROTEINS_full": (0.741, 0.008), "Citeseer": (0.938, 0.007), "Cora": (0.941, 0.007)},
}
ATTACK_7 = {  # Table 5.8
    "AIDS": {"COX2": (0.925, 0.001), "DHFR": (0.913, 0.005), "ENZYMES": (0.784, 0.010),
             "PROTEINS_full": (0.848, 0.010), "Citeseer": (0.538, 0.022), "Cora": (0.520, 0.011),
             "Pubmed": (0.849, 0.004)},
    "COX2": {"AIDS": (0.954, 0.007), "DHFR": (0.982, 0.001), "ENZYMES": (0.874, 0.010),
             "PROTEINS_full": (0.898, 0.030), "Citeseer": (0.947, 0.003), "Cora": (0.940, 0.007),
             "Pubmed": (0.875, 0.034)},
    "DHFR": {"AIDS": (0.982, 0.002), "COX2": (0.992, 0.00), "ENZYMES": (0.871, 0.017),
             "PROTEINS_full": (0.966, 0.008), "Citeseer": (0.933, 0.008), "Cora": (0.947, 0.012),
             "Pubmed": (0.937, 0.003)},
    "ENZYMES": {"AIDS": (0.698, 0.007), "COX2": (0.691, 0.008), "DHFR": (0.671, 0.003),
                "PROTEINS_full": (0.610, 0.001), "Citeseer": (0.657, 0.009), "Cora": (0.662, 0.006),
                "Pubmed": (0.677, 0.001)},
    "PROTEINS_full": {"AIDS": (0.984, 0.002), "COX2": (0.962, 0.010), "DHFR": (0.986, 0.002),
                      "ENZYMES": (0.993, 0.001), "Citeseer": (0.840, 0.013), "Cora": (0.823, 0.006),
                      "Pubmed": (0.987, 0.005)},
    "Citeseer": {"AIDS": (0.816, 0.048), "COX2": (0.791, 0.033), "DHFR": (0.702, 0.025), "ENZYMES": (0.880, 0.057),
                 "PROTEINS_full": (0.902, 0.026), "Cora": (0.977, 0.000), "Pubmed": (0.964, 0.000)},
    "Cora": {"AIDS": (0.746, 0.068), "COX2": (0.680, 0.038), "DHFR": (0.574, 0.038), "ENZYMES": (0.888, 0.014),
             "PROTEINS_full": (0.695, 0.10), "Citeseer": (0.960, 0.001), "Pubmed": (0.935, 0.001)},
    "Pubmed": {"AIDS": (0.807, 0.016), "COX2": (0.712, 0.025), "DHFR": (0.710, 0.006), "ENZYMES": (0.881, 0.009),
               "PROTEINS_full": (0.739, 0.012), "Citeseer": (0.956, 0.001), "Cora": (0.949, 0.001)},
}

# Transferring attacks with their best shadow dataset: target -> (shadow, precision, recall).
ATTACK_1_PRECISION_RECALL = {  # Table 5.16
    "AIDS": ("ENZYMES", (0.725, 0.044), (0.505, 0.110)),
    "COX2": ("PROTEINS_full", (0.828, 0.013), (0.686, 0.100)),
    "DHFR": ("COX2", (0.691, 0.015), (0.704, 0.022)),
    "ENZYMES": ("AIDS", (0.639, 0.023), (0.615, 0.046)),
    "PROTEINS_full": ("Citeseer", (0.750, 0.022), (0.800, 0.055)),
    "Citeseer": ("Cora", (0.871, 0.005), (0.958, 0.005)),
    "Cora": ("Citeseer", (0.854, 0.003), (0.883, 0.008)),
    "Pubmed": ("Cora", (0.765, 0.009), (0.897, 0.012)),
}
ATTACK_4_PRECISION_RECALL = {  # Table 5.18
    "AIDS": ("DHFR", (0.688, 0.013), (0.628, 0.046)),
    "COX2": ("DHFR", (0.787, 0.009), (0.835, 0.033)),
    "DHFR": ("COX2", (0.726, 0.008), (0.793, 0.015)),
    "ENZYMES": ("AIDS", (0.637, 0.025), (0.683, 0.041)),
    "PROTEINS_full": ("Pubmed", (0.686, 0.045), (0.955, 0.020)),
    "Citeseer": ("Cora", (0.874, 0.004), (0.956, 0.004)),
    "Cora": ("Citeseer", (0.854, 0.002), (0.896, 0.004)),
    "Pubmed": ("Citeseer", (0.790, 0.009), (0.877, 0.012)),
}
ATTACK_5_PRECISION_RECALL = {  # Table 5.19
    "AIDS": ("PROTEINS_full", (0.854, 0.003), (0.663, 0.005)),
    "COX2": ("DHFR", (0.941, 0.004), (0.923, 0.022)),
    "DHFR": ("COX2", (0.973, 0.004), (0.942, 0.025)),
    "ENZYMES": ("Citeseer", (0.608, 0.005), (0.675, 0.013)),
    "PROTEINS_full": ("COX2", (0.996, 0.003), (0.061, 0.055)),
    "Citeseer": ("Cora", (0.888, 0.006), (0.885, 0.005)),
    "Cora": ("Citeseer", (0.867, 0.006), (0.892, 0.009)),
    "Pubmed": ("Cora", (0.824, 0.010), (0.913, 0.014)),
}
ATTACK_7_PRECISION_RECALL = {  # Table 5.21
    "AIDS": ("COX2", (0.870, 0.003), (0.781, 0.013)),
    "COX2": ("DHFR", (0.941, 0.004), (0.966, 0.009)),
    "DHFR": ("COX2", (0.972, 0.002), (0.994, 0.005)),
    "ENZYMES": ("AIDS", (0.617, 0.012), (0.693, 0.036)),
    "PROTEINS_full": ("ENZYMES", (0.955, 0.004), (0.974, 0.010)),
    "Citeseer": ("Cora", (0.898, 0.003), (0.913, 0.008)),
    "Cora": ("Citeseer", (0.874, 0.004), (0.911, 0.005)),
    "Pubmed": ("Citeseer", (0.881, 0.006), (0.901, 0.010)),
}

_AUC_TABLES = {"attack-3": (ATTACK_3, "Table 5.5"), "attack-6": (ATTACK_6, "Table 5.9")}
_TRANSFER_TABLES = {"attack-1": (ATTACK_1, "Table 5.3"), "attack-4": (ATTACK_4, "Table 5.6"),
                    "attack-5": (ATTACK_5, "Table 5.7"), "attack-7": (ATTACK_7, "Table 5.8")}
_PRECISION_RECALL = {"attack-3": (ATTACK_3_PRECISION_RECALL, "Table 5.17"),
                     "attack-6": (ATTACK_6_PRECISION_RECALL, "Table 5.20")}
_TRANSFER_PRECISION_RECALL = {"attack-1": (ATTACK_1_PRECISION_RECALL, "Table 5.16"),
                              "attack-4": (ATTACK_4_PRECISION_RECALL, "Table 5.18"),
                              "attack-5": (ATTACK_5_PRECISION_RECALL, "Table 5.19"),
                              "attack-7": (ATTACK_7_PRECISION_RECALL, "Table 5.21")}


def _row(attack, dataset, metric, value, source, shadow=None, distance=None, std=None) -> dict:
    return {"attack": attack, "dataset": dataset, "shadow": shadow, "distance": distance, "metric": metric,
            "value": value, "std": std, "source": source}


def reference_rows() -> list[dict]:
    """Every number above as one long-format row: attack, dataset, shadow, distance, metric
    ("auc", "precision", "recall", "f1"), value, std (None where the thesis gives none), source."""
    rows = []
    for dataset, values in ATTACK_0_KMEANS.items():
        rows += [_row("attack-0", dataset, metric, value, "Table 5.14", distance="correlation")
                 for metric, value in zip(("precision", "recall", "f1", "auc"), values)]
    rows += [_row("attack-0", dataset, "auc", value, "§5.4.2", distance=distance)
             for (dataset, distance), value in ATTACK_0_QUOTED.items()]
    rows += [_row("attack-2", dataset, "auc", value, "§5.1") for dataset, value in ATTACK_2_QUOTED.items()]
    for attack, (table, source) in _AUC_TABLES.items():
        rows += [_row(attack, dataset, "auc", mean, source, std=std) for dataset, (mean, std) in table.items()]
    for attack, (table, source) in _PRECISION_RECALL.items():
        for dataset, pr in table.items():
            rows += [_row(attack, dataset, metric, mean, source, std=std)
                     for metric, (mean, std) in zip(("precision", "recall"), pr)]
    for attack, (table, source) in _TRANSFER_TABLES.items():
        rows += [_row(attack, target, "auc", mean, source, shadow=shadow, std=std)
                 for target, by_shadow in table.items() for shadow, (mean, std) in by_shadow.items()]
    for attack, (table, source) in _TRANSFER_PRECISION_RECALL.items():
        for target, (shadow, *pr) in table.items():
            rows += [_row(attack, target, metric, mean, source, shadow=shadow, std=std)
                     for metric, (mean, std) in zip(("precision", "recall"), pr)]
    return rows
