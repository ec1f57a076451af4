# Membership inference at low false-positive rates (LiRA) and the empirical audit of every
# release: scripts/lira_heads.py, scripts/lira.py, scripts/audit_one_run.py.


rule lira_heads:
    """The N shadow and T target heads, clean, each on |d| random records of the candidate pool."""
    wildcard_constraints:
        head_kind="finetune|certified",
    input:
        unpack(lambda w: tuned_inputs(LIRA_HEAD_SECTION[w.head_kind])),
        script=script("lira_heads.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
    output:
        f"{RESULTS}/{{dataset}}/attack/lira/heads_{{head_kind}}.pt",
    params:
        choices=lambda w: choice_config(LIRA_HEAD_SECTION[w.head_kind]),
        library=library("lira_heads.py"),
        pool=" ".join(LIRA["pool"]),
        head=kind_spec_option("head", "head", "finetune"),
        certified=kind_spec_option("certified", "certified", "certified"),
        shadows=LIRA["shadows"],
        targets=LIRA["targets"],
        seed=stage_seed("lira_heads"),
        threads_option=threads_option("lira_heads"),
    log:
        f"{RESULTS}/{{dataset}}/logs/lira_heads_{{head_kind}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/lira_heads_{{head_kind}}.tsv"
    threads: torch_threads("lira_heads")
    resources:
        mem_mb=job_memory("lira_heads"),
        runtime=job_runtime("lira_heads"),
    conda:
        ENV
    shell:
        "python {input.script:q} --features {input.features:q} --pool {params.pool} --head-kind {wildcards.head_kind}"
        " {params.head} {params.certified} --shadows {params.shadows} --targets {params.targets}"
        " --seed {params.seed} --out {output:q} {params.threads_option} {params.choices} 2> {log:q}"


rule lira:
    """LiRA and the loss attack, adaptive and not, against one method's releases of the target
    heads; metrics with intervals, every decision's score and the hypothesis-test audit."""
    wildcard_constraints:
        target=one_of(AUDITED),
    input:
        unpack(release_inputs),
        **tuned_inputs("head"),
        script=script("lira.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        splits=f"{RESULTS}/{{dataset}}/splits.json",
        heads=lambda w: f"{RESULTS}/{w.dataset}/attack/lira/heads_{lira_head_kind(w.target)}.pt",
    output:
        csv=LIRA_TABLE.path(RESULTS, "{dataset}", "{target}"),
        scores=LIRA_SCORE_TABLE.path(RESULTS, "{dataset}", "{target}"),
        audit=HYPOTHESIS_TEST_AUDIT_TABLE.path(RESULTS, "{dataset}", "{target}"),
    params:
        choices=choice_config("head"),
        library=library("lira.py"),
        release=release_args,
        expect=lambda w: expect(
            grid(UTILITY_TABLE, [w.dataset], [w.target] if w.target != "none" else []),
            release_records(w.dataset, [w.target] if w.target != "none" else []),
            {
                f"{RESULTS}/{w.dataset}/attack/lira/heads_{lira_head_kind(w.target)}.pt": grids.lira_heads_record(
                    config, lira_head_kind(w.target), stage_seed("lira_heads")
                )
            },
        ),
        head=spec_option("head-spec", "head"),
        attacks=" ".join(LIRA["attacks"]),
        population=LIRA["rmia"]["population"],
        gamma=LIRA["rmia"]["gamma"],
        fpr=" ".join(map(str, LIRA["fpr"])),
        bootstrap=LIRA["bootstrap"],
        confidence=config["audit"]["confidence"],
        delta=config["protect"]["delta"],
        seed=stage_seed("lira"),
        threads_option=threads_option("lira"),
    log:
        f"{RESULTS}/{{dataset}}/logs/lira_{{target}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/lira_{{target}}.tsv"
    threads: torch_threads("lira")
    resources:
        mem_mb=job_memory("lira"),
        runtime=job_runtime("lira"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --method {wildcards.target} --features {input.features:q}"
        " --splits {input.splits:q} --heads {input.heads:q} {params.release} {params.head}"
        " --attacks {params.attacks} --population {params.population} --rmia-gamma {params.gamma}"
        " --fpr {params.fpr} --bootstrap {params.bootstrap} --confidence {params.confidence} --delta {params.delta} --seed {params.seed} --out-csv {output.csv:q}"
        " --out-scores {output.scores:q} --out-audit {output.audit:q} {params.threads_option} {params.expect} {params.choices} 2> {log:q}"


rule lira_references:
    """LiRA and RMIA against the clean target heads with 1, 2, 4, … of the shadow heads as
    references: how each attack's power depends on the reference models it can afford."""
    input:
        script=script("lira_references.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        heads=f"{RESULTS}/{{dataset}}/attack/lira/heads_finetune.pt",
    output:
        LIRA_REFERENCES_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("lira_references.py"),
        attacks=" ".join(a for a in LIRA["attacks"] if a in REFERENCE_ATTACKS),
        population=LIRA["rmia"]["population"],
        gamma=LIRA["rmia"]["gamma"],
        fpr=" ".join(map(str, LIRA["fpr"])),
        bootstrap=LIRA["bootstrap"],
        seed=stage_seed("lira"),
        expect=lambda w: expect(
            {
                f"{RESULTS}/{w.dataset}/attack/lira/heads_finetune.pt": grids.lira_heads_record(
                    config, "finetune", stage_seed("lira_heads")
                )
            }
        ),
        threads_option=threads_option("lira_references"),
    log:
        f"{RESULTS}/{{dataset}}/logs/lira_references.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/lira_references.tsv"
    threads: torch_threads("lira_references")
    resources:
        mem_mb=job_memory("lira_references"),
        runtime=job_runtime("lira_references"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --features {input.features:q} --heads {input.heads:q}"
        " --attacks {params.attacks} --population {params.population} --rmia-gamma {params.gamma}"
        " --fpr {params.fpr} --bootstrap {params.bootstrap} --seed {params.seed} --out {output:q}"
        " {params.threads_option} {params.expect} 2> {log:q}"


rule audit_canary:
    """The gradient-canary audits of the DP-SGD head (white box with every update, final model) at
    audit.canary.eps; a lower bound above the release's claim stops the job."""
    input:
        **tuned_inputs("head"),
        script=script("audit_canary.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        release=f"{RESULTS}/{{dataset}}/protect/dpsgd.pt",
    output:
        CANARY_AUDIT_TABLE.path(RESULTS, "{dataset}"),
    params:
        choices=choice_config("head"),
        library=library("audit_canary.py"),
        head=spec_option("head-spec", "head"),
        eps=" ".join(map(str, config["audit"]["canary"]["eps"])),
        runs=config["audit"]["canary"]["runs"],
        confidence=config["audit"]["confidence"],
        delta=config["protect"]["delta"],
        seed=stage_seed("audit_canary"),
        expect=lambda w: expect(release_records(w.dataset, ["dpsgd"])),
        threads_option=threads_option("audit_canary"),
    log:
        f"{RESULTS}/{{dataset}}/logs/audit_canary.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/audit_canary.tsv"
    threads: torch_threads("audit_canary")
    resources:
        mem_mb=job_memory("audit_canary"),
        runtime=job_runtime("audit_canary"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --features {input.features:q} --release {input.release:q}"
        " {params.head} --eps {params.eps} --runs {params.runs} --confidence {params.confidence} --delta {params.delta}"
        " --seed {params.seed} --out {output:q} {params.threads_option} {params.expect} {params.choices} 2> {log:q}"


rule audit_crafted_pair:
    """The crafted-pair audits of the certified heads' releases at audit.canary.eps: a neighbouring
    pair built to move the certified head as far as its proof allows, each world released
    audit.canary.draws times; a lower bound above the release's claim stops the job."""
    input:
        script=script("audit_crafted_pair.py"),
        sensitivity=f"{RESULTS}/{{dataset}}/certified/sensitivity.json",
        releases=expand(f"{RESULTS}/{{{{dataset}}}}/protect/{{method}}.pt", method=CERTIFIED_METHODS),
    output:
        CRAFTED_PAIR_AUDIT_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("audit_crafted_pair.py"),
        methods=" ".join(CERTIFIED_METHODS),
        eps=" ".join(map(str, config["audit"]["canary"]["eps"])),
        draws=config["audit"]["canary"]["draws"],
        confidence=config["audit"]["confidence"],
        delta=config["protect"]["delta"],
        seed=stage_seed("audit_crafted_pair"),
        expect=lambda w: expect(
            release_records(w.dataset, CERTIFIED_METHODS), sensitivity_records(w.dataset, CERTIFIED_METHODS)
        ),
        threads_option=threads_option("audit_crafted_pair"),
    log:
        f"{RESULTS}/{{dataset}}/logs/audit_crafted_pair.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/audit_crafted_pair.tsv"
    threads: torch_threads("audit_crafted_pair")
    resources:
        mem_mb=job_memory("audit_crafted_pair"),
        runtime=job_runtime("audit_crafted_pair"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --sensitivity {input.sensitivity:q}"
        " --methods {params.methods} --releases {input.releases:q} --eps {params.eps} --draws {params.draws}"
        " --confidence {params.confidence} --delta {params.delta} --seed {params.seed} --out {output:q}"
        " {params.threads_option} {params.expect} 2> {log:q}"


rule audit_one_run:
    """The one-run audit (Steinke et al. 2023) of every method at every ε, per canary kind."""
    input:
        **tuned_inputs("head", "certified"),
        script=script("audit_one_run.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        releases=expand(f"{RESULTS}/{{{{dataset}}}}/protect/{{method}}.{{ext}}", method=MECHANISMS, ext=["pt", "csv"]),
    output:
        ONE_RUN_AUDIT_TABLE.path(RESULTS, "{dataset}"),
    params:
        choices=choice_config("head", "certified"),
        library=library("audit_one_run.py"),
        methods=" ".join(AUDITED),
        protect_dir=lambda w: f"{RESULTS}/{w.dataset}/protect",
        pool=" ".join(LIRA["pool"]),
        head=spec_option("head-spec", "head"),
        certified=spec_option("certified", "certified"),
        canaries=ONE_RUN["canaries"],
        fraction=ONE_RUN["guess_fraction"],
        kinds=" ".join(ONE_RUN["kinds"]),
        confidence=config["audit"]["confidence"],
        delta=config["protect"]["delta"],
        seed=stage_seed("audit_one_run"),
        expect=lambda w: expect(grid(UTILITY_TABLE, [w.dataset], MECHANISMS), release_records(w.dataset, MECHANISMS)),
        threads_option=threads_option("audit_one_run"),
    log:
        f"{RESULTS}/{{dataset}}/logs/audit_one_run.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/audit_one_run.tsv"
    threads: torch_threads("audit_one_run")
    resources:
        mem_mb=job_memory("audit_one_run"),
        runtime=job_runtime("audit_one_run"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --methods {params.methods} --features {input.features:q}"
        " --pool {params.pool} --protect-dir {params.protect_dir} {params.head}"
        " {params.certified} --canaries {params.canaries}"
        " --guess-fraction {params.fraction} --kinds {params.kinds} --confidence {params.confidence}"
        " --delta {params.delta} --seed {params.seed} --out {output:q} {params.threads_option} {params.expect} {params.choices} 2> {log:q}"


rule membership_tables:
    """One dataset's LiRA metrics and audit rows, each in one tidy file (the per-record scores stay
    one file per method: the figure reads a few rows of each)."""
    input:
        script=script("merge_csv.py"),
        lira=[LIRA_TABLE.path(RESULTS, "{dataset}", t) for t in AUDITED],
        audit=lambda w: list(audit_parts(w.dataset)),
    output:
        lira=LIRA_TABLE.path(RESULTS, "{dataset}"),
        audit=AUDIT_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("merge_csv.py"),
        lira_table=LIRA_TABLE.name,
        audit_table=AUDIT_TABLE.name,
        lira=lambda w: expect(grid(LIRA_TABLE, [w.dataset], AUDITED)),
        audit=lambda w: expect(audit_parts(w.dataset)),
    log:
        f"{RESULTS}/{{dataset}}/logs/membership_tables.log",
    localrule: True
    conda:
        ENV
    shell:
        "(python {input.script:q} --table {params.lira_table} --out {output.lira:q} {input.lira:q} {params.lira}"
        " && python {input.script:q} --table {params.audit_table} --out {output.audit:q} {input.audit:q} {params.audit}) 2> {log:q}"


rule audit_figures:
    """Fig. 4 (log-log ROC of the strongest attack per method) and Fig. 5 (claimed ε against the
    audited lower bound, violations marked)."""
    input:
        script=script("plot_audit.py"),
        lira=files(LIRA_TABLE, DATASETS),
        scores=[LIRA_SCORE_TABLE.path(RESULTS, d, t) for d in DATASETS for t in AUDITED],
        audit=files(AUDIT_TABLE, DATASETS),
        references=files(LIRA_REFERENCES_TABLE, DATASETS),
    output:
        fig4_png=report(f"{RESULTS}/figures/fig4_roc.png", caption="../report/fig4.rst", category="Figures"),
        fig4_pdf=f"{RESULTS}/figures/fig4_roc.pdf",
        fig5_png=report(f"{RESULTS}/figures/fig5_audit.png", caption="../report/fig5.rst", category="Figures"),
        fig5_pdf=f"{RESULTS}/figures/fig5_audit.pdf",
        references_png=report(
            f"{RESULTS}/figures/fig_references.png", caption="../report/fig_references.rst", category="Figures"
        ),
        references_pdf=f"{RESULTS}/figures/fig_references.pdf",
        references_md=f"{RESULTS}/tables/lira_references.md",
    params:
        library=library("plot_audit.py"),
        expect=expect(
            grid(LIRA_TABLE, DATASETS),
            grid(LIRA_SCORE_TABLE, DATASETS, AUDITED),
            grid(AUDIT_TABLE, DATASETS),
            grid(LIRA_REFERENCES_TABLE, DATASETS),
        ),
    log:
        f"{RESULTS}/logs/audit_figures.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --lira {input.lira:q} --scores {input.scores:q} --audit {input.audit:q}"
        " --references {input.references:q} --fig4 {output.fig4_png:q} {output.fig4_pdf:q}"
        " --fig5 {output.fig5_png:q} {output.fig5_pdf:q} --fig-references {output.references_png:q} {output.references_pdf:q}"
        " --md-references {output.references_md:q} {params.expect} 2> {log:q}"
