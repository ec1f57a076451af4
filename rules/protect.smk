rule protect:
    """Noisy releases of the head for one mechanism at every ε, and their utility loss."""
    input:
        script=script("protect.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        head=f"{RESULTS}/{{dataset}}/finetune/head.pt",
        sensitivity=f"{RESULTS}/{{dataset}}/sensitivity.json",
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
        "python {input.script} --dataset {wildcards.dataset} --features {input.features} --head {input.head}"
        " --sensitivity {input.sensitivity} --mechanism {wildcards.mechanism} --eps {params.eps}"
        " --delta {params.delta} --repeats {params.repeats} --seed {params.seed} --out-csv {output.csv}"
        " --out-heads {output.heads} --device {params.device} 2> {log}"


rule utility_table:
    """All mechanisms' utility rows of one dataset in one tidy CSV."""
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
