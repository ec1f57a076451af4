"""Names of the contrastive-privacy branch (thesis Ch. 4, He & Zhang): the target kinds, the
attacks run against each, and the columns of its metrics table. One owner for what the
attack rule writes and the report reads."""

from __future__ import annotations

from privssl.attacks.mia_spec import DISTINCT_METRIC_ATTACKS as METRIC_ATTACKS  # Song & Mittal 2021

# supervised: encoder + classification layer trained end-to-end with cross-entropy;
# contrastive: SimCLR encoder (Talos at λ = 0) + a classification layer on its frozen output;
# talos: the same with the adversarial attribute classifier at λ > 0.
TARGET_KINDS = ("supervised", "contrastive", "talos")
NN_ATTACK = "nn"  # attack MLP on the top-2 sorted posteriors and the correctness of the prediction
LABEL_ONLY_ATTACKS = ("label_only_augmentation", "label_only_boundary")  # Choquette-Choo et al. 2021
MEMBERSHIP_ATTACKS = (NN_ATTACK, *METRIC_ATTACKS, *LABEL_ONLY_ATTACKS)
ATTRIBUTE_ATTACK = "attribute_mlp"  # 3-layer MLP from the embedding to the sensitive attribute
CLAIMS = ("membership", "attribute", "talos")  # the thesis's three claims the report settles
# a membership attack's rows: `membership` queries the task's models with the task's labels (the Talos
# claims: what the released model leaks), `membership_task` the membership task's models with its
# labels (contrastive vs supervised, in its regime), only where that task is not the task itself
MEMBERSHIP, MEMBERSHIP_TASK, ATTRIBUTE = "membership", "membership_task", "attribute"
INFERENCES = (MEMBERSHIP, MEMBERSHIP_TASK, ATTRIBUTE)
