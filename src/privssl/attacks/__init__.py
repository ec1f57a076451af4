"""Attacks on released models: membership inference (the paper's shadow-MLP attack and the
metric attacks), LiRA with its shadows, the adaptive attacker who knows the release mechanism,
label-only and attribute inference and the contrastive-privacy attacks of thesis Ch. 4; and the
statistics every attack is reported with (Clopper–Pearson intervals, bootstrap AUC, TPR at low
FPR)."""
