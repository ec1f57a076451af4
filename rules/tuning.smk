rule tune:
    """Each release method's training chosen on public data, one job per tuned section: the
    reference split's folds score a grid of the head's, the certified head's or DP-SGD's settings
    (privssl.release.tuning); the release rules read the choice. Each section is its own script,
    so an edit of one section's code reruns that section's choice and what reads it."""
    wildcard_constraints:
        section=one_of(TUNED),
    input:
        unpack(tune_inputs),
    output:
        table=f"{RESULTS}/{{dataset}}/tuning/{{section}}.csv",
        choice=f"{RESULTS}/{{dataset}}/tuning/{{section}}.json",
    params:
        choices=lambda w: choice_config("head") if w.section == "dpsgd" else "",
        library=lambda w: library(f"tune_{w.section}.py"),
        config=lambda w: tuning_config(w.section),
        head_spec=lambda w, input: f"--head-spec {shlex.quote(f'@{input.head_spec}')}" if w.section == "dpsgd" else "",
        out_dir=lambda w: f"{RESULTS}/{w.dataset}/tuning",
        seed=stage_seed("tune"),
        threads_option=threads_option("tune"),
    log:
        f"{RESULTS}/{{dataset}}/logs/tune_{{section}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/tune_{{section}}.tsv"
    group:
        tuned_group()
    threads: torch_threads("tune")
    priority: core_priority
    resources:
        mem_mb=job_memory("tune"),
        runtime=job_runtime("tune"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --features {input.features:q} --config {params.config}"
        " {params.head_spec} --seed {params.seed} --out-dir {params.out_dir} {params.threads_option} {params.choices} 2> {log:q}"
