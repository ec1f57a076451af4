if OUTPUT_PERTURBATION:

    rule protect:
        """Noisy releases of a trained head for every output-perturbation method at every ε, and
        their utility loss, in one job per dataset. Each method's head and sensitivity record are
        its own (registry: `head`); each method draws from its own seed."""
        input:
            script=script("protect.py"),
            features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
            clean=f"{RESULTS}/{{dataset}}/finetune/head.pt",
            best_clean=f"{RESULTS}/{{dataset}}/finetune/best_head.pt",
            heads={released_head(m)[0] for m in OUTPUT_PERTURBATION},
            sensitivities={released_head(m)[1] for m in OUTPUT_PERTURBATION},
        output:
            csv=files(UTILITY_TABLE, ["{dataset}"], OUTPUT_PERTURBATION),
            heads=expand(f"{RESULTS}/{{{{dataset}}}}/protect/{{mechanism}}.pt", mechanism=OUTPUT_PERTURBATION),
        params:
            library=library("protect.py"),
            mechanisms=" ".join(OUTPUT_PERTURBATION),
            # per method, in the order of `mechanisms` (two methods may share a head)
            heads=lambda w: " ".join(released_head(m)[0].format(dataset=w.dataset) for m in OUTPUT_PERTURBATION),
            sensitivities=lambda w: " ".join(released_head(m)[1].format(dataset=w.dataset) for m in OUTPUT_PERTURBATION),
            seeds=" ".join(str(stage_seed(f"protect_{m}")) for m in OUTPUT_PERTURBATION),
            eps=" ".join(map(str, config["protect"]["eps"])),
            delta=config["protect"]["delta"],
            repeats=config["protect"]["repeats"],
            expect=lambda w: expect(sensitivity_records(w.dataset, OUTPUT_PERTURBATION)),
            graph=lambda w: "--graph" if w.dataset in GRAPHS else "",
            device=config["device"],
            threads_option=threads_option("protect"),
        log:
            f"{RESULTS}/{{dataset}}/logs/protect.log",
        benchmark:
            f"{RESULTS}/{{dataset}}/benchmarks/protect.tsv"
        priority: core_priority
        group:
            GROUP_NOISE
        threads: torch_threads("protect")
        resources:
            mem_mb=job_memory("protect"),
            runtime=job_runtime("protect"),
        conda:
            ENV
        shell:
            "python {input.script:q} --dataset {wildcards.dataset} --features {input.features:q} --clean-head {input.clean:q}"
            " --best-clean-head {input.best_clean:q} --mechanism {params.mechanisms} --head {params.heads} --sensitivity {params.sensitivities}"
            " --eps {params.eps} --delta {params.delta} --repeats {params.repeats} --seed {params.seeds}"
            " --out-csv {output.csv:q} --out-heads {output.heads:q} --device {params.device} {params.graph}"
            " {params.threads_option} {params.expect} 2> {log:q}"


rule protect_dpsgd:
    """The DP-SGD head (Opacus): one private training per (ε, draw), released as is."""
    input:
        **tuned_inputs("head", "dpsgd"),
        script=script("protect_dpsgd.py"),
        features=f"{RESULTS}/{{dataset}}/finetune/features.pt",
        head=f"{RESULTS}/{{dataset}}/finetune/head.pt",
        best_clean=f"{RESULTS}/{{dataset}}/finetune/best_head.pt",
    output:
        csv=UTILITY_TABLE.path(RESULTS, "{dataset}", "dpsgd"),
        heads=f"{RESULTS}/{{dataset}}/protect/dpsgd.pt",
    params:
        choices=choice_config("head", "dpsgd"),
        library=library("protect_dpsgd.py"),
        head=spec_option("head-spec", "head"),
        dpsgd=spec_option("dpsgd", "dpsgd"),
        graph=lambda w: "--graph" if w.dataset in GRAPHS else "",
        eps=" ".join(map(str, config["protect"]["eps"])),
        delta=config["protect"]["delta"],
        seed=stage_seed("protect_dpsgd"),
        device=config["device"],
        threads_option=threads_option("protect_dpsgd"),
    log:
        f"{RESULTS}/{{dataset}}/logs/protect_dpsgd.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/protect_dpsgd.tsv"
    priority: core_priority
    group:
        tuned_group("dpsgd")
    threads: torch_threads("protect_dpsgd")
    resources:
        mem_mb=job_memory("protect_dpsgd"),
        runtime=job_runtime("protect_dpsgd"),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --features {input.features:q} --head {input.head:q}"
        " --best-clean-head {input.best_clean:q} {params.head} {params.dpsgd} --eps {params.eps} --delta {params.delta} {params.graph}"
        " --seed {params.seed} --out-csv {output.csv:q} --out-heads {output.heads:q} --device {params.device}"
        " {params.threads_option} {params.choices} 2> {log:q}"


rule utility_table:
    """All release methods' utility rows of one dataset in one tidy CSV."""
    input:
        script=script("merge_csv.py"),
        parts=lambda w: [UTILITY_TABLE.path(RESULTS, w.dataset, m) for m in released(w.dataset)],
    output:
        UTILITY_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("merge_csv.py"),
        table=UTILITY_TABLE.name,
        expect=lambda w: expect(grid(UTILITY_TABLE, [w.dataset], released(w.dataset))),
    log:
        f"{RESULTS}/{{dataset}}/logs/utility_table.log",
    localrule: True
    priority: core_priority
    conda:
        ENV
    shell:
        "python {input.script:q} --table {params.table} --out {output:q} {input.parts:q} {params.expect} 2> {log:q}"
