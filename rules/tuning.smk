rule tune:
    """Every release method's training chosen on public data: the reference split's folds score a
    grid of the head's, the certified head's and DP-SGD's settings (privssl.release.tuning);
    the release rules read the choice."""
    input:
        script=script("tune.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
    output:
        expand(f"{RESULTS}/{{{{dataset}}}}/tuning/{{section}}.{{ext}}", section=TUNED, ext=["csv", "json"]),
    params:
        config=as_json(
            {key: config[key] for key in ("head", "certified", "dpsgd", "protect")}
            | {"tuning": config.get("tuning", {})}
        ),
        sections=" ".join(TUNED),
        out_dir=lambda w: f"{RESULTS}/{w.dataset}/tuning",
        seed=stage_seed("tune"),
        threads_option=threads_option("tune"),
    log:
        f"{RESULTS}/{{dataset}}/logs/tune.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/tune.tsv"
    threads: torch_threads("tune")
    resources:
        mem_mb=job_memory("tune"),
        runtime=job_runtime("tune"),
    conda:
        ENV
    shell:
        "python {input.script} --dataset {wildcards.dataset} --features {input.features} --config {params.config}"
        " --sections {params.sections} --seed {params.seed} --out-dir {params.out_dir}"
        " {params.threads_option} 2> {log}"
