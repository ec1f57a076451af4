rule protect:
    """Noisy releases of a trained head for one output-perturbation method at every ε, and their
    utility loss. The head and its sensitivity record are the method's (registry: `head`)."""
    input:
        script=script("protect.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        clean=f"{RESULTS}/{{dataset}}/finetune/head.pt",
        head=lambda w: released_head(w.mechanism)[0].format(dataset=w.dataset),
        sensitivity=lambda w: released_head(w.mechanism)[1].format(dataset=w.dataset),
    output:
        csv=f"{RESULTS}/{{dataset}}/protect/{{mechanism}}.csv",
        heads=f"{RESULTS}/{{dataset}}/protect/{{mechanism}}.pt",
    params:
        eps=" ".join(map(str, config["protect"]["eps"])),
        delta=config["protect"]["delta"],
        repeats=config["protect"]["repeats"],
        seed=lambda w: stage_seed(f"protect_{w.mechanism}"),
        device=config["device"],
    log:
        f"{RESULTS}/{{dataset}}/logs/protect_{{mechanism}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/protect_{{mechanism}}.tsv"
    threads: 1
    resources:
        mem_mb=8000,
    conda:
        ENV
    shell:
        "python {input.script} --dataset {wildcards.dataset} --features {input.features} --clean-head {input.clean}"
        " --head {input.head} --sensitivity {input.sensitivity} --mechanism {wildcards.mechanism}"
        " --eps {params.eps} --delta {params.delta} --repeats {params.repeats} --seed {params.seed}"
        " --out-csv {output.csv} --out-heads {output.heads} --device {params.device} 2> {log}"


rule protect_dpsgd:
    """The DP-SGD head (Opacus): one private training per (ε, draw), released as is."""
    input:
        script=script("protect_dpsgd.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        head=f"{RESULTS}/{{dataset}}/finetune/head.pt",
    output:
        csv=f"{RESULTS}/{{dataset}}/protect/dpsgd.csv",
        heads=f"{RESULTS}/{{dataset}}/protect/dpsgd.pt",
    params:
        head=as_json(config["head"]),
        dpsgd=as_json(config["dpsgd"]),
        eps=" ".join(map(str, config["protect"]["eps"])),
        delta=config["protect"]["delta"],
        seed=stage_seed("protect_dpsgd"),
        device=config["device"],
    log:
        f"{RESULTS}/{{dataset}}/logs/protect_dpsgd.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/protect_dpsgd.tsv"
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "python {input.script} --dataset {wildcards.dataset} --features {input.features} --head {input.head}"
        " --head-spec {params.head} --dpsgd {params.dpsgd} --eps {params.eps} --delta {params.delta}"
        " --seed {params.seed} --out-csv {output.csv} --out-heads {output.heads} --device {params.device}"
        " --threads {threads} 2> {log}"


rule utility_table:
    """All release methods' utility rows of one dataset in one tidy CSV."""
    input:
        script=script("merge_csv.py"),
        parts=expand(f"{RESULTS}/{{{{dataset}}}}/protect/{{mechanism}}.csv", mechanism=MECHANISMS),
    output:
        f"{RESULTS}/{{dataset}}/utility.csv",
    log:
        f"{RESULTS}/{{dataset}}/logs/utility_table.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script} --out {output} {input.parts} 2> {log}"
