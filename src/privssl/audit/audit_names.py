"""The audits' threat models and the canary and crafted-pair audits' names, torch-free: the artefact schema and the
config's grids (run before any job) and the audits use one definition.

- black_box: the auditor queries the released head (the hypothesis-test audit on LiRA's scores,
  the one-run audit on its canaries' losses);
- final_model: the auditor sees the released parameters only (privssl.audit.gradient_canary; the
  certified heads' crafted pair, privssl.audit.crafted_pair, where it also chooses both data sets);
- white_box_all_updates: the auditor sees every update of the training (privssl.audit.white_box)."""

BLACK_BOX, FINAL_MODEL, WHITE_BOX_ALL_UPDATES = "black_box", "final_model", "white_box_all_updates"
THREAT_MODELS = (WHITE_BOX_ALL_UPDATES, FINAL_MODEL, BLACK_BOX)
# each audit of the DP-SGD head's gradient canary, and its threat model
CANARY_AUDITS = {"white_box_gdp": WHITE_BOX_ALL_UPDATES, "white_box_test": WHITE_BOX_ALL_UPDATES,
                 "final_model_gdp": FINAL_MODEL, "final_model_test": FINAL_MODEL}
CANARY_ATTACK = "gradient_canary"  # the `attack` column of their rows
# each audit of a certified head by a crafted neighbouring pair (privssl.audit.crafted_pair)
CRAFTED_AUDITS = {"crafted_pair_gdp": FINAL_MODEL, "crafted_pair_test": FINAL_MODEL}
CRAFTED_ATTACK = "crafted_pair"  # the `attack` column of their rows
