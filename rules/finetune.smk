rule encode:
    """Features of every labelled split under the frozen encoder, computed once."""
    wildcard_constraints:
        dataset=one_of(DATASETS),  # images; graphs: rules/graph.smk
    input:
        script=script("encode.py"),
        splits=f"{RESULTS}/{{dataset}}/splits.json",
        encoder=f"{RESULTS}/{{dataset}}/pretrain/encoder.pt",
    output:
        f"{RESULTS}/{{dataset}}/finetune/features.pt",
    params:
        library=library("encode.py"),
        root=config["data_root"],
        device=config["device"],
        threads_option=threads_option("encode"),
    log:
        f"{RESULTS}/{{dataset}}/logs/encode.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/encode.tsv"
    priority: core_priority
    group:
        GROUP_ENCODER
    threads: torch_threads("encode")
    resources:
        mem_mb=job_memory("encode"),
        runtime=job_runtime("encode"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --encoder {input.encoder:q}"
        " --out {output:q} --device {params.device} {params.threads_option} 2> {log:q}"


rule finetune:
    """The released head ω = A_S(d) on the private split, and the tuning grid's best noise-free
    head beside it (read from the grid's table, which the tune job writes with the choice: a
    changed table comes with a rewritten choice, an input)."""
    input:
        **tuned_inputs("head"),
        script=script("finetune.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
    output:
        head=f"{RESULTS}/{{dataset}}/finetune/head.pt",
        best_head=f"{RESULTS}/{{dataset}}/finetune/best_head.pt",
        metrics=f"{RESULTS}/{{dataset}}/finetune/metrics.json",
    params:
        choices=choice_config("head"),
        library=library("finetune.py"),
        head=spec_option("head", "head"),
        device=config["device"],
        threads_option=threads_option("finetune"),
    log:
        f"{RESULTS}/{{dataset}}/logs/finetune.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/finetune.tsv"
    priority: core_priority
    group:
        tuned_group("head")
    threads: torch_threads("finetune")
    resources:
        mem_mb=job_memory("finetune"),
        runtime=job_runtime("finetune"),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --features {input.features:q} {params.head} --out {output.head:q}"
        " --best-out {output.best_head:q} --metrics {output.metrics:q} --device {params.device} {params.threads_option}"
        " {params.choices} 2> {log:q}"


rule certified_head:
    """The certified head (Chaudhuri et al. 2011): L2-regularised logistic regression on clipped
    features, solved to a gradient-norm tolerance, and its proven Δ2."""
    input:
        **tuned_inputs("certified"),
        script=script("certified_head.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
    output:
        head=f"{RESULTS}/{{dataset}}/certified/head.pt",
        sensitivity=f"{RESULTS}/{{dataset}}/certified/sensitivity.json",
        metrics=f"{RESULTS}/{{dataset}}/certified/metrics.json",
    params:
        choices=choice_config("certified"),
        library=library("certified_head.py"),
        certified=spec_option("certified", "certified"),
        device=config["device"],
        threads_option=threads_option("certified_head"),
    log:
        f"{RESULTS}/{{dataset}}/logs/certified_head.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/certified_head.tsv"
    priority: core_priority
    group:
        tuned_group("certified")
    threads: torch_threads("certified_head")
    resources:
        mem_mb=job_memory("certified_head"),
        runtime=job_runtime("certified_head"),
    conda:
        ENV
    shell:
        "python {input.script:q} --features {input.features:q} {params.certified}"
        " --out-head {output.head:q} --out-sensitivity {output.sensitivity:q} --out-metrics {output.metrics:q}"
        " --device {params.device} {params.threads_option} {params.choices} 2> {log:q}"
