rule shadow:
    """The attacker's shadow head and attack models, fitted on its own data."""
    input:
        **tuned_inputs("head"),
        script=script("train_attack.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
    output:
        f"{RESULTS}/{{dataset}}/attack/attacker.pt",
    params:
        choices=choice_config("head"),
        library=library("train_attack.py"),
        head=spec_option("head", "head"),
        attack=as_json({k: v for k, v in config["attack"].items() if k not in ("train_pairs", "lira")}),
        pairs=config["attack"]["train_pairs"],
        seed=stage_seed("shadow"),
        threads_option=threads_option("shadow"),
    log:
        f"{RESULTS}/{{dataset}}/logs/shadow.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/shadow.tsv"
    priority: core_priority
    threads: torch_threads("shadow")
    resources:
        mem_mb=job_memory("shadow"),
        runtime=job_runtime("shadow"),
    conda:
        ENV
    shell:
        "python {input.script:q} --features {input.features:q} {params.head} --attack {params.attack}"
        " --train-pairs {params.pairs} --seed {params.seed} --out {output:q} {params.threads_option} {params.choices} 2> {log:q}"


rule attack:
    """The paper's membership inference, non-adaptive and adaptive, against the clean head (target
    `none`) and every method's releases, in one job per dataset."""
    input:
        **tuned_inputs("head", "certified"),
        script=script("attack.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        splits=f"{RESULTS}/{{dataset}}/splits.json",
        head=f"{RESULTS}/{{dataset}}/finetune/head.pt",
        attacker=f"{RESULTS}/{{dataset}}/attack/attacker.pt",
        protected=expand(f"{RESULTS}/{{{{dataset}}}}/protect/{{method}}.pt", method=MECHANISMS),
    output:
        csv=files(MIA_TABLE, ["{dataset}"], AUDITED),
        scores=files(MIA_SCORE_TABLE, ["{dataset}"], AUDITED),
    params:
        choices=choice_config("head", "certified"),
        library=library("attack.py"),
        expect=lambda w: expect(release_records(w.dataset, MECHANISMS)),
        targets=" ".join(AUDITED),
        seed=stage_seed("attack"),
        head=spec_option("head-spec", "head"),
        certified=spec_option("certified", "certified"),
        fpr=" ".join(map(str, config["attack"]["lira"]["fpr"])),
        bootstrap=config["attack"]["lira"]["bootstrap"],
        threads_option=threads_option("attack"),
    log:
        f"{RESULTS}/{{dataset}}/logs/attack.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/attack.tsv"
    priority: core_priority
    threads: torch_threads("attack")
    resources:
        mem_mb=job_memory("attack"),
        runtime=job_runtime("attack"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --features {input.features:q} --splits {input.splits:q}"
        " --head {input.head:q} --attacker {input.attacker:q} --targets {params.targets} --protected {input.protected:q}"
        " {params.head} {params.certified} --fpr {params.fpr}"
        " --bootstrap {params.bootstrap} --seed {params.seed} --out {output.csv:q} --scores {output.scores:q}"
        " {params.threads_option} {params.expect} {params.choices} 2> {log:q}"


rule mia_table:
    """All attack rows of one dataset in one tidy CSV."""
    input:
        script=script("merge_csv.py"),
        parts=lambda w: [MIA_TABLE.path(RESULTS, w.dataset, t) for t in ["none"] + released(w.dataset)],
    output:
        MIA_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("merge_csv.py"),
        table=MIA_TABLE.name,
        expect=lambda w: expect(grid(MIA_TABLE, [w.dataset], ["none"] + released(w.dataset))),
    log:
        f"{RESULTS}/{{dataset}}/logs/mia_table.log",
    localrule: True
    priority: core_priority
    conda:
        ENV
    shell:
        "python {input.script:q} --table {params.table} --out {output:q} {input.parts:q} {params.expect} 2> {log:q}"
