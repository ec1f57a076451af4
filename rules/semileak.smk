# Thesis Ch. 3 (Semi-Leak): semi-supervised targets and shadows, their attacks and the report.


rule semileak_data:
    """Four equal random parts of the dataset's labelled images and the labelled images of each
    train part (thesis §3.4.1). With download: true the data rule fetches the images first."""
    wildcard_constraints:
        dataset=one_of(SEMILEAK),
    input:
        script=script("semileak_data.py"),
        # the images, where the data rule downloads them (two downloads into one root would collide)
        fetched=[f"{RESULTS}/{{dataset}}/splits.json"] if config["download"] else [],
    output:
        f"{RESULTS}/{{dataset}}/semileak/splits.json",
    params:
        library=library("semileak_data.py"),
        part=lambda w: config["semileak"]["datasets"][w.dataset]["part"],
        labels=lambda w: config["semileak"]["datasets"][w.dataset]["labels"],
        seed=stage_seed("semileak_data"),
        root=config["data_root"],
    log:
        f"{RESULTS}/{{dataset}}/logs/semileak_data.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/semileak_data.tsv"
    threads: 1
    resources:
        mem_mb=job_memory("semileak_data", semileak_scale),
        runtime=job_runtime("semileak_data", semileak_scale),
    conda:
        ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --data-root {params.root:q} --part {params.part}"
        " --labels {params.labels} --seed {params.seed} --out {output:q} 2> {log:q}"


rule semileak_train:
    """One target kind (FixMatch, FlexMatch, UDA, the supervised reference, FixMatch by DP-SGD at
    every ε) of one role (the victim's target or the attacker's shadow), the EMA model kept at
    every checkpoint step. The training state is saved there too: a restarted job resumes. Each
    repeat is an independent training (its own seed), for the verdicts about a training procedure."""
    wildcard_constraints:
        dataset=one_of(SEMILEAK),
        target=one_of(SEMILEAK_TARGETS),
        role="target|shadow",
        repeat=r"\d+",
    input:
        script=script("semileak_train.py"),
        splits=f"{RESULTS}/{{dataset}}/semileak/splits.json",
    output:
        models=f"{RESULTS}/{{dataset}}/semileak/repeat{{repeat}}/{{role}}/{{target}}.pt",
        # means over the training batches (DP-SGD's before the noise): covered by no claim
        history=SEMILEAK_HISTORY_TABLE.path(
            RESULTS, "{dataset}", {"repeat": "{repeat}", "role": "{role}", "target": "{target}"}
        ),
    params:
        library=library("semileak_train.py"),
        semileak=lambda w: semileak_section(
            "network", "augmentation", "train", *(["defences"] if w.target == "fixmatch_dpsgd" else [])
        ),
        delta=config["protect"]["delta"],
        accountant=config["dpsgd"]["accountant"],
        seed=lambda w: semileak_seed(f"semileak_{w.role}", w.repeat),
        root=config["data_root"],
        device=config["device"],
        checkpoints=f"{RESULTS}/{{dataset}}/semileak/checkpoint/repeat{{repeat}}/{{role}}/{{target}}",
        threads_option=threads_option("semileak_train"),
    log:
        f"{RESULTS}/{{dataset}}/logs/semileak_train_repeat{{repeat}}_{{role}}_{{target}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/semileak_train_repeat{{repeat}}_{{role}}_{{target}}.tsv"
    threads: torch_threads("semileak_train")
    resources:
        mem_mb=job_memory("semileak_train", semileak_scale),
        runtime=job_runtime("semileak_train", semileak_scale),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --role {wildcards.role}"
        " --target {wildcards.target} --semileak {params.semileak} --delta {params.delta}"
        " --accountant {params.accountant} --seed {params.seed} --checkpoints {params.checkpoints}"
        " --models {output.models:q} --history {output.history:q} --device {params.device}"
        " {params.threads_option} 2> {log:q}"


rule semileak_attack:
    """A_NN, the metric attacks and A_DA against every target at every checkpoint, each fitted on
    the shadow trained its way; A_DA's views and similarity ablations and the top-1 defence at the
    last step; the models' accuracy, over-fitting and JS distance (entropy). One job per repeat:
    that repeat's targets, each attacked with that repeat's shadow."""
    wildcard_constraints:
        dataset=one_of(SEMILEAK),
        repeat=r"\d+",
    input:
        script=script("semileak_attack.py"),
        splits=f"{RESULTS}/{{dataset}}/semileak/splits.json",
        targets=expand(
            f"{RESULTS}/{{{{dataset}}}}/semileak/repeat{{{{repeat}}}}/target/{{target}}.pt", target=SEMILEAK_TARGETS
        ),
        shadows=expand(
            f"{RESULTS}/{{{{dataset}}}}/semileak/repeat{{{{repeat}}}}/shadow/{{target}}.pt", target=SEMILEAK_TARGETS
        ),
        histories=lambda w: part_paths(SEMILEAK_HISTORY_TABLE, semileak_histories(w)),
    output:
        metrics=SEMILEAK_TABLE.path(RESULTS, "{dataset}", "{repeat}"),
        # every metrics row's per-record scores (record = the image's index in the pool)
        scores=SEMILEAK_SCORE_TABLE.path(RESULTS, "{dataset}", "{repeat}"),
        # the training histories merged: not private, as they are
        history=SEMILEAK_MERGED_HISTORY_TABLE.path(RESULTS, "{dataset}", "{repeat}"),
    params:
        library=library("semileak_attack.py"),
        semileak=semileak_section("augmentation", "attack", "defences"),
        expect=lambda w: expect(parts(SEMILEAK_HISTORY_TABLE, semileak_histories(w))),
        fpr=" ".join(map(str, LIRA["fpr"])),
        bootstrap=LIRA["bootstrap"],
        seed=lambda w: semileak_seed("semileak_attack", w.repeat),
        root=config["data_root"],
        device=config["device"],
        threads_option=threads_option("semileak_attack"),
    log:
        f"{RESULTS}/{{dataset}}/logs/semileak_attack_repeat{{repeat}}.log",
    benchmark:
        f"{RESULTS}/{{dataset}}/benchmarks/semileak_attack_repeat{{repeat}}.tsv"
    threads: torch_threads("semileak_attack")
    resources:
        mem_mb=job_memory("semileak_attack", semileak_scale),
        runtime=job_runtime("semileak_attack", semileak_scale),
        gpu=config["gpus_per_job"],
    conda:
        ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --data-root {params.root:q} --targets {input.targets:q}"
        " --shadows {input.shadows:q} --histories {input.histories:q} --semileak {params.semileak}"
        " --fpr {params.fpr} --bootstrap {params.bootstrap} --seed {params.seed} --repeat {wildcards.repeat}"
        " --out {output.metrics:q}"
        " --scores {output.scores:q} --history {output.history:q} --device {params.device} {params.threads_option} {params.expect} 2> {log:q}"


rule semileak_report:
    """Thesis Ch. 3: the attacks per algorithm and member kind, over-fitting, JS distance and A_DA
    over the training steps, the ablations and defences, and the chapter's claims beside the
    thesis's statements; from the attack rule's metrics and per-record scores only."""
    input:
        script=script("semileak_report.py"),
        thesis=resource("thesis_semileak.csv"),
        metrics=files(SEMILEAK_TABLE, SEMILEAK, SEMILEAK_REPEATS),
        scores=files(SEMILEAK_SCORE_TABLE, SEMILEAK, SEMILEAK_REPEATS),
    output:
        attacks_png=report(
            f"{RESULTS}/figures/fig_semileak_attacks.png",
            caption="../report/semileak_attacks.rst",
            category="Semi-supervised learning",
        ),
        attacks_pdf=f"{RESULTS}/figures/fig_semileak_attacks.pdf",
        steps_png=report(
            f"{RESULTS}/figures/fig_semileak_steps.png",
            caption="../report/semileak_steps.rst",
            category="Semi-supervised learning",
        ),
        steps_pdf=f"{RESULTS}/figures/fig_semileak_steps.pdf",
        ablations_png=report(
            f"{RESULTS}/figures/fig_semileak_ablations.png",
            caption="../report/semileak_ablations.rst",
            category="Semi-supervised learning",
        ),
        ablations_pdf=f"{RESULTS}/figures/fig_semileak_ablations.pdf",
        csv=report(
            f"{RESULTS}/tables/semileak.csv",
            caption="../report/semileak_table.rst",
            category="Semi-supervised learning",
        ),
        md=f"{RESULTS}/tables/semileak.md",
    params:
        library=library("semileak_report.py"),
        early=config.get("semileak", {}).get("defences", {}).get("early_stopping"),
        views=config.get("semileak", {}).get("attack", {}).get("views"),
        similarity=config.get("semileak", {}).get("attack", {}).get("similarity"),
        expect=expect(grid(SEMILEAK_TABLE, SEMILEAK, SEMILEAK_REPEATS)),
    log:
        f"{RESULTS}/logs/semileak_report.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script:q} --metrics {input.metrics:q} --scores {input.scores:q} --thesis {input.thesis:q}"
        " --early-stopping {params.early}"
        " --views {params.views} --similarity {params.similarity}"
        " --fig-attacks {output.attacks_png:q} {output.attacks_pdf:q} --fig-steps {output.steps_png:q} {output.steps_pdf:q}"
        " --fig-ablations {output.ablations_png:q} {output.ablations_pdf:q} --csv {output.csv:q} --md {output.md:q}"
        " {params.expect} 2> {log:q}"
