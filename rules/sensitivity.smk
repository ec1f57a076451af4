rule sensitivity:
    """Sampled Δ1, Δ2 of the head: m neighbour pairs from the reference pool (population) or inside d
    (paper), 2m batched trainings."""
    input:
        **tuned_inputs("head"),
        script=script("sensitivity.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
    output:
        f"{RESULTS}/{{dataset}}/sensitivity.json",
    params:
        choices=choice_config("head"),
        library=library("sensitivity.py"),
        head=spec_option("head", "head"),
        sampling=config["sensitivity"]["sampling"],
        m=config["sensitivity"]["m"],
        rho=config["sensitivity"]["rho"],
        gamma=config["sensitivity"]["gamma"],
        chunk=config["sensitivity"]["chunk_size"],
        seed=stage_seed("sensitivity"),
        # |D| for Table 1; a graph's DGI encoder trains on the whole graph instead
        pretrain_size=lambda w: (
            f"--pretrain-size {config['datasets'][w.dataset]['splits']['pretrain']}" if w.dataset in DATASETS else ""
        ),
        device=config["device"],
        threads_option=threads_option("sensitivity"),
    log:
        f"{RESULTS}/{{dataset}}/logs/sensitivity.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/sensitivity.tsv"
    priority: core_priority
    group:
        GROUP_NOISE
    threads: torch_threads("sensitivity")
    resources:
        mem_mb=job_memory("sensitivity"),
        runtime=job_runtime("sensitivity"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --features {input.features:q} {params.head} --sampling {params.sampling}"
        " --m {params.m} --rho {params.rho} --gamma {params.gamma} --chunk-size {params.chunk} --seed {params.seed}"
        " {params.pretrain_size} --out {output:q} --device {params.device} {params.threads_option} {params.choices} 2> {log:q}"
