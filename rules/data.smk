rule data:
    """Fetch the dataset into data_root (when download: true) and draw the disjoint splits."""
    wildcard_constraints:
        dataset=one_of(DATASETS),  # images; graphs: rules/graph.smk
    input:
        script=script("prepare_data.py"),
    output:
        f"{RESULTS}/{{dataset}}/splits.json",
    params:
        sizes=lambda w: as_json(config["datasets"][w.dataset]["splits"]),
        seed=stage_seed("splits"),
        root=config["data_root"],
        download="--download" if config["download"] else "",
    log:
        f"{RESULTS}/{{dataset}}/logs/data.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/data.tsv"
    threads: 1
    resources:
        mem_mb=job_memory("data"),
        runtime=job_runtime("data"),
    conda:
        ENV
    shell:
        "python {input.script} --dataset {wildcards.dataset} --data-root {params.root} --sizes {params.sizes}"
        " --seed {params.seed} {params.download} --out {output} 2> {log}"
