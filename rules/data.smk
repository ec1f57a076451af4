rule data:
    """Fetch the dataset into data_root (when download: true) and draw the disjoint splits."""
    wildcard_constraints:
        dataset=one_of(DATASETS),  # images; graphs: rules/graph.smk
    input:
        script=script("prepare_data.py"),
    output:
        f"{RESULTS}/{{dataset}}/splits.json",
    params:
        library=library("prepare_data.py"),
        sizes=lambda w: as_json(config["datasets"][w.dataset]["splits"]),
        seed=stage_seed("splits"),
        root=config["data_root"],
        download="--download" if config["download"] else "",
    log:
        f"{RESULTS}/{{dataset}}/logs/data.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/data.tsv"
    priority: core_priority
    group:
        GROUP_SPLITS
    threads: 1
    resources:
        mem_mb=job_memory("data"),
        runtime=job_runtime("data"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --data-root {params.root:q} --sizes {params.sizes}"
        " --seed {params.seed} {params.download} --out {output:q} 2> {log:q}"


rule contrastive_data:
    """The contrastive-privacy branch's splits (thesis Ch. 4): four equal parts and the auxiliary set,
    outside the public pre-training split, with task labels and sensitive attributes."""
    wildcard_constraints:
        dataset=one_of(CONTRASTIVE),
    input:
        script=script("contrastive_data.py"),
        splits=f"{RESULTS}/{{dataset}}/splits.json",
    output:
        f"{RESULTS}/{{dataset}}/contrastive/splits.json",
    params:
        library=library("contrastive_data.py"),
        task=lambda w: config["contrastive"]["datasets"][w.dataset]["task"],
        membership_task=lambda w: membership_task_of(config["contrastive"]["datasets"][w.dataset]),
        part=lambda w: config["contrastive"]["datasets"][w.dataset]["part"],
        aux=lambda w: config["contrastive"]["datasets"][w.dataset]["aux"],
        seed=stage_seed("contrastive_data"),
        root=config["data_root"],
    log:
        f"{RESULTS}/{{dataset}}/logs/contrastive_data.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/contrastive_data.tsv"
    # the first job of the longest chain: without the chain's priority it lost every tie to the
    # other branches' ready jobs, and in the preset's run at 4e4e0ca its chain started 54 minutes in
    priority: LONGEST_CHAIN_PRIORITY
    group:
        GROUP_SPLITS
    threads: 1
    resources:
        mem_mb=job_memory("contrastive_data"),
        runtime=job_runtime("contrastive_data"),
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --task {params.task}"
        " --membership-task {params.membership_task} --part {params.part} --aux {params.aux} --seed {params.seed} --out {output:q} 2> {log:q}"
