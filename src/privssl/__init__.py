"""privssl: privacy attacks and defences on self-supervised learning, as a Snakemake workflow.

The library is laid out by stage of the DAG, one sub-package per stage; imports go one way, from
the top of this list down (a layers contract of import-linter in pyproject.toml, checked by
`make lint` and tests/test_layers.py):

- `config` (the config check; `config_checks` below it, the checks a schema cannot express) and
  `claim_sources` (the claim branches' files, loaded for the
  claims ledger and the digest);
- `artefacts` (the validated loader of every file a rule reads, and each table declared once
  beside its track: its file, schema and the rows the config asks of it), which knows every stage
  below;
- `grids`: what the tables' rows share (a dataset's release methods and the (ε, draw) grid of
  each, the targets of LiRA and the audits) and the fields each release file records;
- `reports`: the figures and tables of every branch;
- `audit`: empirical lower bounds on ε and the canaries of the one-run audits;
- `attacks`: membership, attribute and label-only inference, LiRA, the adaptive attacker and the
  statistics of every attack (intervals, AUC, TPR at low FPR);
- `release`: what turns a trained model into a released one with a privacy claim — noise,
  calibration, the sensitivity sampler, the certified and DP-SGD heads, the registry of release
  methods;
- `training`: encoders, SimCLR, heads, Talos, SAM, DPCL, DPAdapter, private SGD;
- `accounting` (RDP and the DP-SGD and DPCL accountants), `data` (image data sets, splits, label
  maps) and `graphs` (the graph track, self-contained), which import none of each other;
- `io` (atomic, byte-reproducible writes), `cli` (argument types) and `code_graph` (the library
  code each script can run, which reruns rules and voids checkpoints when it changes), which
  import nothing of privssl.
"""

__version__ = "0.1.0"
