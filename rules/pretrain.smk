rule pretrain:
    """SimCLR on the public split D. The checkpoint is not an output: Snakemake keeps it when a
    job dies, and the restarted job (--rerun-incomplete) resumes from it."""
    wildcard_constraints:
        dataset=one_of(DATASETS),  # images; graphs: rules/graph.smk
    input:
        script=script("pretrain.py"),
        splits=f"{RESULTS}/{{dataset}}/splits.json",
    output:
        encoder=f"{RESULTS}/{{dataset}}/pretrain/encoder.pt",
        history=PRETRAIN_HISTORY_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("pretrain.py"),
        simclr=as_json(config.get("simclr", {})),  # absent in a graph-only config
        seed=stage_seed("pretrain"),
        root=config["data_root"],
        device=config["device"],
        checkpoint=f"{RESULTS}/{{dataset}}/pretrain/checkpoint/simclr.pt",
        threads_option=threads_option("pretrain"),
    log:
        f"{RESULTS}/{{dataset}}/logs/pretrain.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/pretrain.tsv"
    priority: core_priority
    group:
        GROUP_ENCODER
    threads: torch_threads("pretrain")
    resources:
        mem_mb=job_memory("pretrain"),
        runtime=job_runtime("pretrain"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --simclr {params.simclr}"
        " --seed {params.seed} --checkpoint {params.checkpoint} --encoder {output.encoder:q}"
        " --history {output.history:q} --device {params.device} {params.threads_option} 2> {log:q}"
