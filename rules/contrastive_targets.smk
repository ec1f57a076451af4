rule contrastive_train:
    """Thesis Ch. 4: the supervised, contrastive and Talos models (every λ, every repeat) of one role,
    the victim's targets or the attacker's shadows, each on its role's training set. Per-model
    checkpoints are not outputs: a restarted job (--rerun-incomplete) resumes from them."""
    wildcard_constraints:
        dataset=one_of(CONTRASTIVE),
        role="target|shadow",
    input:
        script=script("contrastive_train.py"),
        splits=f"{RESULTS}/{{dataset}}/contrastive/splits.json",
        encoder=f"{RESULTS}/{{dataset}}/pretrain/encoder.pt",
    output:
        models=f"{RESULTS}/{{dataset}}/contrastive/{{role}}_models.pt",
        history=CONTRASTIVE_HISTORY_TABLE.path(RESULTS, "{dataset}", "{role}"),
    params:
        library=library("contrastive_train.py"),
        simclr=as_json(config.get("simclr", {})),
        contrastive=contrastive_section("repeats", "fine_tune", "supervised", "classifier", "talos"),
        seed=lambda w: stage_seed(f"contrastive_{w.role}"),
        root=config["data_root"],
        device=config["device"],
        checkpoints=f"{RESULTS}/{{dataset}}/contrastive/checkpoint/{{role}}",
        threads_option=threads_option("contrastive_train"),
    log:
        f"{RESULTS}/{{dataset}}/logs/contrastive_train_{{role}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/contrastive_train_{{role}}.tsv"
    priority: LONGEST_CHAIN_PRIORITY
    threads: torch_threads("contrastive_train")
    resources:
        mem_mb=job_memory("contrastive_train"),
        runtime=job_runtime("contrastive_train"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --role {wildcards.role}"
        " --public-encoder {input.encoder:q} --simclr {params.simclr} --contrastive {params.contrastive}"
        " --seed {params.seed} --checkpoints {params.checkpoints} --models {output.models:q}"
        " --history {output.history:q} --device {params.device} {params.threads_option} 2> {log:q}"
