"""The names of the semi-supervised branch (thesis Ch. 3, Semi-Leak), torch-free so that the config
check and the Snakefile read them without importing torch.

Targets: the three semi-supervised algorithms of the thesis, the supervised reference trained on
the whole labelled target part (the thesis's red line in Fig. 3.2), and FixMatch trained by DP-SGD
(the defence of Table 3.4 with a real budget). The attacks' names: privssl.attacks.semi_leak_spec.
"""

ALGORITHMS = ("fixmatch", "flexmatch", "uda")
SUPERVISED = "supervised"
DPSGD_TARGET = "fixmatch_dpsgd"  # FixMatch's losses trained by DP-SGD (privssl.training.semi_supervised)
TARGETS = (*ALGORITHMS, SUPERVISED, DPSGD_TARGET)
ARCHITECTURES = ("cnn", "wrn")  # a small CNN for the CPU default, WRN-28-k (the thesis's WRN-28-2) on a GPU
SIMILARITIES = ("js", "cosine", "correlation", "euclidean")  # the distances of §3.4.5; js is A_DA's default
MEMBER_KINDS = ("all", "labelled", "unlabelled")  # which members are scored against every non-member
# Table 3.4's defences on the answer, metrics.csv's `defence` column; early stopping is a checkpoint
# step and DP-SGD a target (DPSGD_TARGET); model stacking is not built
DEFENCES = ("none", "top1")
SPLITS = ("target_train", "target_test", "shadow_train", "shadow_test")  # §3.4.1: four equal parts
# the thesis's claims the report judges (resources/thesis_semileak.csv has one row each)
CLAIMS = ("ada_above_baselines", "ada_unlabelled", "no_overfitting", "js_rises_with_auc", "views", "similarity",
          "early_stopping", "dpsgd")
