"""Names of the Semi-Leak attacks (thesis Ch. 3), torch-free so that the config check, the grids and
the report read them without importing torch: the baselines of §3.2 and A_DA of §3.3."""

from privssl.attacks.mia_spec import DISTINCT_METRIC_ATTACKS as METRIC_ATTACKS  # Song & Mittal, §3.2.2

NN_ATTACK = "nn"  # A_NN: descending-sorted posteriors, MLP 64-32-2
DA_ATTACK = "data_augmentation"  # A_DA: 3 K×K similarity matrices of K weak and K strong views
ATTACKS = (NN_ATTACK, *METRIC_ATTACKS, DA_ATTACK)
