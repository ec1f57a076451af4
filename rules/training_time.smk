# Training-time privacy (seeds 004 DPCL and 002 DPAdapter): networks trained on d under DP,
# released through the same utility rows and membership attacks as the post-hoc methods.


rule dpcl_train:
    """DPCL (naive DP-SGD and the noisy connection point) of the public encoder on d, a DP head on
    top; the attacker's adaptive shadow trained the same way on its own records."""
    wildcard_constraints:
        dataset=one_of(DATASETS),
    input:
        script=script("dpcl_train.py"),
        splits=f"{RESULTS}/{{dataset}}/splits.json",
        encoder=f"{RESULTS}/{{dataset}}/pretrain/encoder.pt",
        attacker=f"{RESULTS}/{{dataset}}/attack/attacker.pt",
        metrics=f"{RESULTS}/{{dataset}}/finetune/metrics.json",
    output:
        utility=files(UTILITY_TABLE, ["{dataset}"], DPCL_METHODS),
        releases=expand(f"{RESULTS}/{{{{dataset}}}}/dpcl/{{method}}.pt", method=DPCL_METHODS),
        # computed on d without noise and covered by no claim: a diagnostic, outside the releases
        history=DPCL_HISTORY_TABLE.path(RESULTS, "{dataset}"),
        accounting=DPCL_ACCOUNTING_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("dpcl_train.py"),
        dpcl=as_json(config.get("dpcl", {})),
        simclr=as_json(config.get("simclr", {})),
        clean=clean_accuracy,
        delta=config["protect"]["delta"],
        seed=stage_seed("dpcl"),
        root=config["data_root"],
        device=config["device"],
        threads_option=threads_option("dpcl_train"),
    log:
        f"{RESULTS}/{{dataset}}/logs/dpcl_train.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/dpcl_train.tsv"
    priority: core_priority
    threads: torch_threads("dpcl_train")
    resources:
        mem_mb=job_memory("dpcl_train"),
        runtime=job_runtime("dpcl_train"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --splits {input.splits:q} --data-root {params.root:q}"
        " --encoder {input.encoder:q} --attacker {input.attacker:q} --clean-accuracy {params.clean}"
        " --dpcl {params.dpcl} --simclr {params.simclr} --delta {params.delta} --seed {params.seed}"
        " --out-utility {output.utility:q} --out-releases {output.releases:q} --out-history {output.history:q}"
        " --out-accounting {output.accounting:q} --device {params.device} {params.threads_option} 2> {log:q}"


rule dpadapter_train:
    """Standard, vanilla-SAM and DPAdapter pre-training on the public split, each fine-tuned on d by
    DP-SGD at every ε; the DPAdapter network at `release_radius` is released as `dpadapter`."""
    wildcard_constraints:
        dataset=one_of(DATASETS),
    input:
        script=script("dpadapter_train.py"),
        splits=f"{RESULTS}/{{dataset}}/splits.json",
        encoder=f"{RESULTS}/{{dataset}}/pretrain/encoder.pt",
        attacker=f"{RESULTS}/{{dataset}}/attack/attacker.pt",
        metrics=f"{RESULTS}/{{dataset}}/finetune/metrics.json",
    output:
        utility=UTILITY_TABLE.path(RESULTS, "{dataset}", "dpadapter"),
        release=f"{RESULTS}/{{dataset}}/dpadapter/dpadapter.pt",
        results=DPADAPTER_TABLE.path(RESULTS, "{dataset}"),
        history=DPADAPTER_HISTORY_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("dpadapter_train.py"),
        dpadapter=as_json(config.get("dpadapter", {})),
        clean=clean_accuracy,
        delta=config["protect"]["delta"],
        seed=stage_seed("dpadapter"),
        root=config["data_root"],
        device=config["device"],
        threads_option=threads_option("dpadapter_train"),
    log:
        f"{RESULTS}/{{dataset}}/logs/dpadapter_train.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/dpadapter_train.tsv"
    priority: core_priority
    threads: torch_threads("dpadapter_train")
    resources:
        mem_mb=job_memory("dpadapter_train"),
        runtime=job_runtime("dpadapter_train"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --splits {input.splits:q} --data-root {params.root:q}"
        " --encoder {input.encoder:q} --attacker {input.attacker:q} --clean-accuracy {params.clean}"
        " --dpadapter {params.dpadapter} --delta {params.delta} --seed {params.seed} --out-utility {output.utility:q}"
        " --out-release {output.release:q} --out-results {output.results:q} --out-history {output.history:q}"
        " --device {params.device} {params.threads_option} 2> {log:q}"


rule attack_training_time:
    """The paper's membership inference, non-adaptive and adaptive, against every training-time
    release, on the `attack` rule's evaluation records."""
    wildcard_constraints:
        dataset=one_of(DATASETS),
    input:
        script=script("attack_training_time.py"),
        splits=f"{RESULTS}/{{dataset}}/splits.json",
        attacker=f"{RESULTS}/{{dataset}}/attack/attacker.pt",
        releases=[training_time_release(m) for m in TRAINING_TIME],
    output:
        csv=files(MIA_TABLE, ["{dataset}"], TRAINING_TIME),
        scores=files(MIA_SCORE_TABLE, ["{dataset}"], TRAINING_TIME),
    params:
        library=library("attack_training_time.py"),
        fpr=" ".join(map(str, config["attack"]["lira"]["fpr"])),
        bootstrap=config["attack"]["lira"]["bootstrap"],
        seed=stage_seed("attack"),  # the attack rule's: the same evaluation records
        root=config["data_root"],
        threads_option=threads_option("attack_training_time"),
        expect=lambda w: expect(release_records(w.dataset, TRAINING_TIME)),
    log:
        f"{RESULTS}/{{dataset}}/logs/attack_training_time.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/attack_training_time.tsv"
    priority: core_priority
    threads: torch_threads("attack_training_time")
    resources:
        mem_mb=job_memory("attack_training_time"),
        runtime=job_runtime("attack_training_time"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --splits {input.splits:q} --data-root {params.root:q}"
        " --attacker {input.attacker:q} --releases {input.releases:q} --fpr {params.fpr}"
        " --bootstrap {params.bootstrap} --seed {params.seed} --out {output.csv:q}"
        " --scores {output.scores:q} {params.threads_option} {params.expect} 2> {log:q}"


rule training_time_report:
    """Fig. fig_training_time_dp and the DPAdapter and DPCL accounting tables."""
    input:
        script=script("training_time_report.py"),
        utility=files(UTILITY_TABLE, DATASETS),
        mia=files(MIA_TABLE, DATASETS),
        mia_scores=mia_scores(DATASETS),
        splits=expand(f"{RESULTS}/{{dataset}}/splits.json", dataset=DATASETS),
        dpadapter=files(DPADAPTER_TABLE, DATASETS if DPADAPTER_METHODS else []),
        accounting=files(DPCL_ACCOUNTING_TABLE, DATASETS if DPCL_METHODS else []),
    output:
        png=report(
            f"{RESULTS}/figures/fig_training_time_dp.png",
            caption="../report/fig_training_time_dp.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/fig_training_time_dp.pdf",
        dpadapter=[f"{RESULTS}/tables/dpadapter.{ext}" for ext in ("csv", "md")] if DPADAPTER_METHODS else [],
        accounting=[f"{RESULTS}/tables/dpcl_accounting.{ext}" for ext in ("csv", "md")] if DPCL_METHODS else [],
    params:
        library=library("training_time_report.py"),
        delta=config["protect"]["delta"],
        expect=expect(
            grid(UTILITY_TABLE, DATASETS),
            grid(MIA_TABLE, DATASETS),
            grid(DPADAPTER_TABLE, DATASETS if DPADAPTER_METHODS else []),
            grid(DPCL_ACCOUNTING_TABLE, DATASETS if DPCL_METHODS else []),
        ),
    log:
        f"{RESULTS}/logs/training_time_report.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --utility {input.utility:q} --mia {input.mia:q}"
        " --mia-scores {input.mia_scores:q} --splits {input.splits:q}"
        " --dpadapter {input.dpadapter:q} --accounting {input.accounting:q} --delta {params.delta}"
        " --figure {output.png:q} {output.pdf:q} --dpadapter-table {output.dpadapter:q}"
        " --accounting-table {output.accounting:q} {params.expect} 2> {log:q}"
