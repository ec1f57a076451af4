"""Validated loaders for the files the rules read.

Every JSON, tensor and CSV artefact is checked where a script loads it: the keys or columns it
needs, finite numbers in their range, sizes that agree between fields. A bad file is refused with

    ArtefactError: <path>: field '<name>': <what is wrong> (expected <what is allowed>)

so a corrupted or truncated intermediate file stops the job that reads it instead of becoming a
plausible number downstream (a Δ of 0 would be released as "1-DP" with noise scale 0).

The checks are three generic ones (`check_numbers`, `require`, `check_tensor`) driven by a small
schema per artefact: a dict of field -> spec (`Num`, `Text`, `Flag`, `Tensor`, `Shapes`, `Params`,
`Each`, `Names`), checked in order. A dimension or bound named by a string is bound to the first
size or value seen, and every later use must agree: `Tensor(("n", "F"))` then
`Tensor(("n",), "int", Num(0, "n_classes", high_open=True))` ties features to their labels.

The package itself defines and re-exports nothing: a reader imports each name from the module that
defines it, one concept each, and each table whose rows the config fixes is declared once,
beside its track (`tables.Table`:
its file and parts, its schema, the rows the config asks of it), so that the rules derive its
paths and their readers' --expect from that one declaration.

- `specs`: the value specs, `ArtefactError` and `fail`, the generic checks (`check_numbers`,
  `require`, `check_tensor`, `check_fields`) and the specs every track shares (POSITIVE,
  PROBABILITY, COUNT, a label tensor);
- `tables`: the declaration of a table (`Table`), the readers (`load_tensor_file`, `load_json_file`, `check_recorded`, `read_table`,
  `load_csv_file(s)`, `estimates_within_intervals`) and the completeness checks of a table
  (`check_grid`; `check_expected` against the config's grid, `expected_of`), with
  the columns and the relation helper several tracks' tables share;
- `splits`: the checks every track's splits.json shares (disjoint splits, the pool record);
- `record_scores`: the one tidy shape of every attack's per-record file (`score_lines`,
  `with_calls`, the threshold relation) and the reader that gives a summary row its per-record
  decisions from it (`attach_decisions`, by `Outcome`);
- `image`: the image track: features, heads, releases, sensitivities, the encoder's training
  history, the utility, MIA, LiRA and reference-sweep tables and the MIA and LiRA scores,
  declared, and their loaders (`load_image_splits`,
  `load_sensitivity`, `load_release`, `load_lira_heads`, `load_attacker`, `load_encoder`,
  `load_tuning_folds`, `load_private_sets`);
- `audits`: the audit tables (hypothesis test, one-run, canary, crafted pair; audit.csv), declared,
  with the relations between their columns;
- `training_time`: the training-time branch (DPCL, DPAdapter): the release record, its tables
  and training histories;
- `graphs`: the graph track: graphs, embeddings, the link-stealing files, tables and per-pair
  scores;
- `contrastive`: the contrastive track (thesis Ch. 4): its table with the membership rows' scores
  and the attribute rows' guesses, its training histories, splits and models;
- `semileak`: the Semi-Leak track (thesis Ch. 3): its table with the per-record scores, the
  histories, splits and models;
- `claims`: the claim catalogues (THESIS_CLAIMS, THESIS_SEMILEAK, PAPER_CLAIMS, `every_claim_once`);
- `tuning`: the tuned settings a script takes as a file (`parse_checking_choices`,
  `check_tuning_choice`, `best_noise_free_point`).

Within the package, `specs` is below `tables` and `splits`, and those below the track modules;
no track module imports another.
"""
