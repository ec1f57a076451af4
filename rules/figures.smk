rule figures:
    """Fig. 1 (utility loss vs ε), Fig. 2 (MIA accuracy vs ε and vs utility loss) and Fig. 3 (the
    accuracy-ε frontier) for every release method, line style by guarantee kind; from CSV only."""
    input:
        script=script("plot_figures.py"),
        utility=files(UTILITY_TABLE, DATASETS),
        mia=files(MIA_TABLE, DATASETS),
        mia_scores=mia_scores(DATASETS),
    output:
        fig1_png=report(f"{RESULTS}/figures/fig1_utility_loss.png", caption="../report/fig1.rst", category="Figures"),
        fig1_pdf=f"{RESULTS}/figures/fig1_utility_loss.pdf",
        fig2_png=report(f"{RESULTS}/figures/fig2_mia.png", caption="../report/fig2.rst", category="Figures"),
        fig2_pdf=f"{RESULTS}/figures/fig2_mia.pdf",
        fig3_png=report(f"{RESULTS}/figures/fig3_frontier.png", caption="../report/fig3.rst", category="Figures"),
        fig3_pdf=f"{RESULTS}/figures/fig3_frontier.pdf",
    params:
        library=library("plot_figures.py"),
        expect=expect(grid(UTILITY_TABLE, DATASETS), grid(MIA_TABLE, DATASETS)),
    log:
        f"{RESULTS}/logs/figures.log",
    localrule: True
    priority: core_priority
    conda:
        ENV
    shell:
        "python {input.script:q} --utility {input.utility:q} --mia {input.mia:q}"
        " --mia-scores {input.mia_scores:q} --fig1 {output.fig1_png:q} {output.fig1_pdf:q}"
        " --fig2 {output.fig2_png:q} {output.fig2_pdf:q} --fig3 {output.fig3_png:q} {output.fig3_pdf:q} {params.expect} 2> {log:q}"


rule table1:
    """Table 1 of the paper: |D|, |d|, m, Δ1, Δ2 per dataset."""
    input:
        script=script("make_table1.py"),
        sensitivity=expand(f"{RESULTS}/{{dataset}}/sensitivity.json", dataset=DATASETS),
    output:
        csv=report(f"{RESULTS}/tables/table1.csv", caption="../report/table1.rst", category="Tables"),
        md=f"{RESULTS}/tables/table1.md",
    params:
        library=library("make_table1.py"),
        datasets=" ".join(DATASETS),
        expect=expect(
            {f"{RESULTS}/{d}/sensitivity.json": grids.sensitivity_record(config, d, "finetune") for d in DATASETS}
        ),
    log:
        f"{RESULTS}/logs/table1.log",
    localrule: True
    priority: core_priority
    conda:
        ENV
    shell:
        "python {input.script:q} --datasets {params.datasets} --sensitivity {input.sensitivity:q}"
        " --csv {output.csv:q} --md {output.md:q} {params.expect} 2> {log:q}"


rule table2:
    """Table 2: accuracy and MIA at ε ∈ {1, 10} (the grid's nearest) per release method, with its guarantee kind."""
    input:
        script=script("make_table2.py"),
        utility=files(UTILITY_TABLE, DATASETS),
        mia=files(MIA_TABLE, DATASETS),
        mia_scores=mia_scores(DATASETS),
    output:
        csv=report(f"{RESULTS}/tables/table2.csv", caption="../report/table2.rst", category="Tables"),
        md=f"{RESULTS}/tables/table2.md",
    params:
        library=library("make_table2.py"),
        expect=expect(grid(UTILITY_TABLE, DATASETS), grid(MIA_TABLE, DATASETS)),
    log:
        f"{RESULTS}/logs/table2.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --utility {input.utility:q} --mia {input.mia:q}"
        " --mia-scores {input.mia_scores:q} --targets 1 10"
        " --csv {output.csv:q} --md {output.md:q} {params.expect} 2> {log:q}"


rule claims:
    """The claims ledger across the seeds: one row per (claim, dataset, setting), the paper's value
    beside ours with its 95 % interval and n, and the verdict; from CSV only."""
    input:
        script=script("claims_ledger.py"),
        catalogue=resource("claims.csv"),
        utility=files(UTILITY_TABLE, DATASETS),
        mia=files(MIA_TABLE, DATASETS),
        mia_scores=mia_scores(DATASETS),
        audit=files(AUDIT_TABLE, DATASETS),
        lira=files(LIRA_TABLE, DATASETS),
        contrastive_thesis=resource("thesis_contrastive.csv"),
        contrastive=files(CONTRASTIVE_TABLE, CONTRASTIVE),
        contrastive_scores=files(CONTRASTIVE_SCORE_TABLE, CONTRASTIVE),
        contrastive_guesses=files(CONTRASTIVE_GUESS_TABLE, CONTRASTIVE),
        semileak_thesis=resource("thesis_semileak.csv"),
        semileak=files(SEMILEAK_TABLE, SEMILEAK, SEMILEAK_REPEATS),
        semileak_scores=files(SEMILEAK_SCORE_TABLE, SEMILEAK, SEMILEAK_REPEATS),
        dpadapter=files(DPADAPTER_TABLE, DATASETS if DPADAPTER_METHODS else []),
    output:
        csv=report(f"{RESULTS}/tables/claims.csv", caption="../report/claims.rst", category="Tables"),
        md=f"{RESULTS}/tables/claims.md",
    params:
        library=library("claims_ledger.py"),
        branches=lambda w, input: branch_arguments(input),
        expect=expect(
            grid(UTILITY_TABLE, DATASETS),
            grid(MIA_TABLE, DATASETS),
            grid(AUDIT_TABLE, DATASETS),
            grid(LIRA_TABLE, DATASETS),
            grid(CONTRASTIVE_TABLE, CONTRASTIVE),
            grid(SEMILEAK_TABLE, SEMILEAK, SEMILEAK_REPEATS),
            grid(DPADAPTER_TABLE, DATASETS if DPADAPTER_METHODS else []),
        ),
    log:
        f"{RESULTS}/logs/claims.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --catalogue {input.catalogue:q} --utility {input.utility:q} --mia {input.mia:q}"
        " --mia-scores {input.mia_scores:q}"
        " --audit {input.audit:q} --lira {input.lira:q} --contrastive-thesis {input.contrastive_thesis:q}"
        " --semileak-thesis {input.semileak_thesis:q} {params.branches}"
        " --csv {output.csv:q} --md {output.md:q} {params.expect} 2> {log:q}"


rule contrastive_report:
    """Thesis Ch. 4: task accuracy, membership and attribute inference per target kind and against
    Talos's λ, and the three claims beside the thesis's statements; from CSV only."""
    input:
        script=script("contrastive_report.py"),
        thesis=resource("thesis_contrastive.csv"),
        metrics=files(CONTRASTIVE_TABLE, CONTRASTIVE),
        scores=files(CONTRASTIVE_SCORE_TABLE, CONTRASTIVE),
        guesses=files(CONTRASTIVE_GUESS_TABLE, CONTRASTIVE),
    output:
        privacy_png=report(
            f"{RESULTS}/figures/fig_contrastive_privacy.png",
            caption="../report/contrastive_privacy.rst",
            category="Contrastive privacy",
        ),
        privacy_pdf=f"{RESULTS}/figures/fig_contrastive_privacy.pdf",
        lambda_png=report(
            f"{RESULTS}/figures/fig_talos_lambda.png",
            caption="../report/talos_lambda.rst",
            category="Contrastive privacy",
        ),
        lambda_pdf=f"{RESULTS}/figures/fig_talos_lambda.pdf",
        csv=report(
            f"{RESULTS}/tables/contrastive.csv",
            caption="../report/contrastive_table.rst",
            category="Contrastive privacy",
        ),
        md=f"{RESULTS}/tables/contrastive.md",
    params:
        library=library("contrastive_report.py"),
        expect=expect(grid(CONTRASTIVE_TABLE, CONTRASTIVE)),
    log:
        f"{RESULTS}/logs/contrastive_report.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --metrics {input.metrics:q} --scores {input.scores:q} --guesses {input.guesses:q}"
        " --thesis {input.thesis:q}"
        " --fig-privacy {output.privacy_png:q} {output.privacy_pdf:q} --fig-lambda {output.lambda_png:q} {output.lambda_pdf:q}"
        " --csv {output.csv:q} --md {output.md:q} {params.expect} 2> {log:q}"


rule digest:
    """The run's headline figures in one page, each beside the file and column it comes from, and
    every report table built again from the files it is computed from (never copied from another
    rule's Markdown); docs/results.md is the default run's digest (`make docs`)."""
    input:
        script=script("results_digest.py"),
        splits=expand(f"{RESULTS}/{{dataset}}/splits.json", dataset=DATASETS),
        metrics=expand(f"{RESULTS}/{{dataset}}/finetune/metrics.json", dataset=DATASETS),
        utility=files(UTILITY_TABLE, DATASETS),
        mia=files(MIA_TABLE, DATASETS),
        mia_scores=mia_scores(DATASETS),
        lira=files(LIRA_TABLE, DATASETS),
        audit=files(AUDIT_TABLE, DATASETS),
        sensitivity=expand(f"{RESULTS}/{{dataset}}/sensitivity.json", dataset=DATASETS),
        link_protection=files(LINK_PROTECTION_TABLE, PROTECTED_GRAPHS),
        link_parts=files(LINK_ATTACKS_TABLE, GRAPHS) + part_paths(LINK_TRANSFER_TABLE, transfer_pairs()),
        catalogue=resource("claims.csv"),
        contrastive_thesis=resource("thesis_contrastive.csv"),
        contrastive=files(CONTRASTIVE_TABLE, CONTRASTIVE),
        contrastive_scores=files(CONTRASTIVE_SCORE_TABLE, CONTRASTIVE),
        contrastive_guesses=files(CONTRASTIVE_GUESS_TABLE, CONTRASTIVE),
        semileak_thesis=resource("thesis_semileak.csv"),
        semileak=files(SEMILEAK_TABLE, SEMILEAK, SEMILEAK_REPEATS),
        semileak_scores=files(SEMILEAK_SCORE_TABLE, SEMILEAK, SEMILEAK_REPEATS),
        dpadapter=files(DPADAPTER_TABLE, DATASETS if DPADAPTER_METHODS else []),
        accounting=files(DPCL_ACCOUNTING_TABLE, DATASETS if DPCL_METHODS else []),
    output:
        f"{RESULTS}/digest.md",
    params:
        library=library("results_digest.py"),
        datasets=" ".join(DATASETS),
        graphs=" ".join(PROTECTED_GRAPHS),
        branches=lambda w, input: branch_arguments(input),
        delta=config["protect"]["delta"],
        expect=expect(
            *(grid(table, DATASETS) for table in (UTILITY_TABLE, MIA_TABLE, LIRA_TABLE, AUDIT_TABLE)),
            grid(LINK_PROTECTION_TABLE, PROTECTED_GRAPHS),
            {f"{RESULTS}/{d}/sensitivity.json": grids.sensitivity_record(config, d, "finetune") for d in DATASETS},
            grid(LINK_ATTACKS_TABLE, GRAPHS),
            parts(LINK_TRANSFER_TABLE, transfer_pairs()),
            grid(CONTRASTIVE_TABLE, CONTRASTIVE),
            grid(SEMILEAK_TABLE, SEMILEAK, SEMILEAK_REPEATS),
            grid(DPADAPTER_TABLE, DATASETS if DPADAPTER_METHODS else []),
            grid(DPCL_ACCOUNTING_TABLE, DATASETS if DPCL_METHODS else []),
        ),
    log:
        f"{RESULTS}/logs/digest.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --datasets {params.datasets} --splits {input.splits:q} --metrics {input.metrics:q}"
        " --utility {input.utility:q} --mia {input.mia:q}"
        " --mia-scores {input.mia_scores:q} --lira {input.lira:q} --audit {input.audit:q}"
        " --sensitivity {input.sensitivity:q} --graphs {params.graphs} --link-protection {input.link_protection:q}"
        " --link-parts {input.link_parts:q} --catalogue {input.catalogue:q}"
        " --contrastive-thesis {input.contrastive_thesis:q}"
        " --semileak-thesis {input.semileak_thesis:q} {params.branches}"
        " --accounting {input.accounting:q} --delta {params.delta} --targets 1 10"
        " --out {output:q} {params.expect} 2> {log:q}"
