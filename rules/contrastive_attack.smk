rule contrastive_attack:
    """Thesis Ch. 4: NN, metric and label-only membership inference and attribute inference against
    every target model, each fitted on the shadow trained the same way (adaptive for Talos)."""
    wildcard_constraints:
        dataset=one_of(CONTRASTIVE),
    input:
        script=script("contrastive_attack.py"),
        splits=f"{RESULTS}/{{dataset}}/contrastive/splits.json",
        targets=f"{RESULTS}/{{dataset}}/contrastive/target_models.pt",
        shadows=f"{RESULTS}/{{dataset}}/contrastive/shadow_models.pt",
    output:
        metrics=CONTRASTIVE_TABLE.path(RESULTS, "{dataset}"),
        scores=CONTRASTIVE_SCORE_TABLE.path(RESULTS, "{dataset}"),
        guesses=CONTRASTIVE_GUESS_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("contrastive_attack.py"),
        attacks=contrastive_section("attacks"),
        fpr=" ".join(map(str, LIRA["fpr"])),
        bootstrap=LIRA["bootstrap"],
        seed=stage_seed("contrastive_attack"),
        root=config["data_root"],
        device=config["device"],
        threads_option=threads_option("contrastive_attack"),
    log:
        f"{RESULTS}/{{dataset}}/logs/contrastive_attack.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/contrastive_attack.tsv"
    priority: LONGEST_CHAIN_PRIORITY
    threads: torch_threads("contrastive_attack")
    resources:
        mem_mb=job_memory("contrastive_attack"),
        runtime=job_runtime("contrastive_attack"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --targets {input.targets:q}"
        " --shadows {input.shadows:q} --contrastive {params.attacks} --fpr {params.fpr}"
        " --bootstrap {params.bootstrap} --seed {params.seed} --out {output.metrics:q}"
        " --scores {output.scores:q} --guesses {output.guesses:q} --device {params.device}"
        " {params.threads_option} 2> {log:q}"
