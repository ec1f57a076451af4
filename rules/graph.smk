# The graph track. A graph's own rules: data, DGI pre-training and encoding (they produce the
# same features file as the image track, so finetune, sensitivity, protect, shadow and attack
# are shared), the link-stealing attacks of the thesis on a supervised GCN (part A), and
# link stealing against the self-supervised GNN's protected heads (part B).


rule graph_data:
    """Load (or generate) the graph through PyG and draw the disjoint node splits."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("prepare_graph.py"),
    output:
        graph=f"{GRAPH}/graph.pt",
        splits=f"{GRAPH}/splits.json",
    params:
        library=library("prepare_graph.py"),
        root=config.get("graph_data_root"),
        download="--download" if config.get("graph_download") else "",
        generator=lambda w: (
            f"--generator {as_json(config['graphs'][w.dataset]['generator'])}"
            if "generator" in config["graphs"][w.dataset]
            else ""
        ),
        sizes=lambda w: as_json(config["graphs"][w.dataset]["splits"]),
        seed=stage_seed("splits"),
    log:
        f"{GRAPH}/logs/graph_data.log",
    benchmark:
        f"{GRAPH}/benchmarks/graph_data.tsv"
    threads: 1
    resources:
        mem_mb=job_memory("graph_data"),
        runtime=job_runtime("graph_data"),
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --data-root {params.root:q} {params.download}"
        " {params.generator} --sizes {params.sizes} --seed {params.seed} --graph {output.graph:q}"
        " --splits {output.splits:q} 2> {log:q}"


rule graph_pretrain:
    """Deep Graph Infomax on the whole graph, no labels; embeddings of every node."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("graph_pretrain.py"),
        graph=f"{GRAPH}/graph.pt",
    output:
        encoder=f"{GRAPH}/pretrain/encoder.pt",
        history=PRETRAIN_HISTORY_TABLE.path(RESULTS, "{dataset}"),
        embeddings=f"{GRAPH}/pretrain/embeddings.pt",
    params:
        library=library("graph_pretrain.py"),
        dgi=as_json(config.get("dgi", {})),
        seed=stage_seed("pretrain"),
        device=config["device"],
        threads_option=threads_option("graph_pretrain"),
    log:
        f"{GRAPH}/logs/graph_pretrain.log",
    benchmark:
        f"{GRAPH}/benchmarks/graph_pretrain.tsv"
    group:
        GROUP_ENCODER
    threads: torch_threads("graph_pretrain")
    resources:
        mem_mb=job_memory("graph_pretrain"),
        runtime=job_runtime("graph_pretrain"),
        gpu=config["gpus_per_job"],
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --graph {input.graph:q} --dgi {params.dgi} --seed {params.seed}"
        " --encoder {output.encoder:q} --history {output.history:q} --embeddings {output.embeddings:q}"
        " --device {params.device} {params.threads_option} 2> {log:q}"


rule graph_encode:
    """The node splits' DGI embeddings, in the features file of the shared rules."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("graph_encode.py"),
        splits=f"{GRAPH}/splits.json",
        embeddings=f"{GRAPH}/pretrain/embeddings.pt",
    output:
        f"{GRAPH}/finetune/features.pt",
    params:
        library=library("graph_encode.py"),
    log:
        f"{GRAPH}/logs/graph_encode.log",
    benchmark:
        f"{GRAPH}/benchmarks/graph_encode.tsv"
    group:
        GROUP_ENCODER
    threads: 1
    resources:
        mem_mb=job_memory("graph_encode"),
        runtime=job_runtime("graph_encode"),
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --splits {input.splits:q} --embeddings {input.embeddings:q} --out {output:q} 2> {log:q}"


rule link_target:
    """Part A: the thesis's target GCN and the attacker's reference MLP, trained per run, and
    each run's attack pairs (all edges + as many non-edges, split 50/50)."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("link_target.py"),
        graph=f"{GRAPH}/graph.pt",
    output:
        f"{GRAPH}/link/target.pt",
    params:
        library=library("link_target.py"),
        gcn=as_json(config.get("link_stealing", {}).get("gcn", {})),
        runs=config.get("link_stealing", {}).get("runs", 1),
        seed=stage_seed("link_target"),
        device=config["device"],
        threads_option=threads_option("link_target"),
    log:
        f"{GRAPH}/logs/link_target.log",
    benchmark:
        f"{GRAPH}/benchmarks/link_target.tsv"
    threads: torch_threads("link_target")
    resources:
        mem_mb=job_memory("link_target"),
        runtime=job_runtime("link_target"),
        gpu=config["gpus_per_job"],
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --graph {input.graph:q} --gcn {params.gcn} --runs {params.runs}"
        " --seed {params.seed} --out {output:q} --device {params.device} {params.threads_option} 2> {log:q}"


rule link_steal:
    """Part A: Attack-0, 2 (unsupervised) and Attack-3, 6 (supervised) on the target's GCN."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("link_steal.py"),
        graph=f"{GRAPH}/graph.pt",
        target=f"{GRAPH}/link/target.pt",
    output:
        rows=LINK_ATTACKS_TABLE.path(RESULTS, "{dataset}"),
        scores=LINK_ATTACK_SCORE_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("link_steal.py"),
        mlp=as_json(config.get("link_stealing", {}).get("attack_mlp", {})),
        threads_option=threads_option("link_steal"),
    log:
        f"{GRAPH}/logs/link_steal.log",
    benchmark:
        f"{GRAPH}/benchmarks/link_steal.tsv"
    threads: torch_threads("link_steal")
    resources:
        mem_mb=job_memory("link_steal"),
        runtime=job_runtime("link_steal"),
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --graph {input.graph:q} --target {input.target:q}"
        " --attack-mlp {params.mlp} --out {output.rows:q} --scores {output.scores:q} {params.threads_option}"
        " 2> {log:q}"


rule link_transfer:
    """Part A: the transfer attacks (Attack-1, 4, 5, 7), trained on the shadow graph."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
        shadow=one_of(GRAPHS),
    input:
        script=script("link_transfer.py"),
        graph=f"{GRAPH}/graph.pt",
        target=f"{GRAPH}/link/target.pt",
        shadow_graph=f"{RESULTS}/{{shadow}}/graph.pt",
        shadow_target=f"{RESULTS}/{{shadow}}/link/target.pt",
    output:
        rows=LINK_TRANSFER_TABLE.path(RESULTS, "{dataset}", "{shadow}"),
        scores=LINK_TRANSFER_SCORE_TABLE.path(RESULTS, "{dataset}", "{shadow}"),
    params:
        library=library("link_transfer.py"),
        mlp=as_json(config.get("link_stealing", {}).get("attack_mlp", {})),
        threads_option=threads_option("link_transfer"),
    log:
        f"{GRAPH}/logs/link_transfer_{{shadow}}.log",
    benchmark:
        f"{GRAPH}/benchmarks/link_transfer_{{shadow}}.tsv"
    threads: torch_threads("link_transfer")
    resources:
        mem_mb=job_memory("link_transfer"),
        runtime=job_runtime("link_transfer"),
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --shadow {wildcards.shadow} --graph {input.graph:q}"
        " --target {input.target:q} --shadow-graph {input.shadow_graph:q} --shadow-target {input.shadow_target:q}"
        " --attack-mlp {params.mlp} --out {output.rows:q} --scores {output.scores:q} {params.threads_option}"
        " 2> {log:q}"


rule link_table:
    """Part A: every link-stealing row, the mean ± std table beside the thesis, and the figure."""
    input:
        script=script("link_table.py"),
        attacks=files(LINK_ATTACKS_TABLE, GRAPHS),
        transfers=part_paths(LINK_TRANSFER_TABLE, transfer_pairs()),
    output:
        rows=f"{RESULTS}/tables/link_stealing_rows.csv",
        csv=report(f"{RESULTS}/tables/link_stealing.csv", caption="../report/link_stealing.rst", category="Tables"),
        md=f"{RESULTS}/tables/link_stealing.md",
        png=report(f"{RESULTS}/figures/link_stealing.png", caption="../report/link_stealing.rst", category="Figures"),
        pdf=f"{RESULTS}/figures/link_stealing.pdf",
    params:
        library=library("link_table.py"),
        expect=expect(
            grid(LINK_ATTACKS_TABLE, GRAPHS),
            parts(LINK_TRANSFER_TABLE, transfer_pairs()),
        ),
    log:
        f"{RESULTS}/logs/link_table.log",
    localrule: True
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --parts {input.attacks:q} {input.transfers:q} --rows {output.rows:q} --csv {output.csv:q}"
        " --md {output.md:q} --figure {output.png:q} {output.pdf:q} {params.expect} 2> {log:q}"


rule link_protect:
    """Part B: link stealing against the self-supervised GNN's head, unprotected (`none`) and every
    noisy head of each mechanism, in one job per graph: the attacker sees only the released
    model's posteriors."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("link_protect.py"),
        graph=f"{GRAPH}/graph.pt",
        embeddings=f"{GRAPH}/pretrain/embeddings.pt",
        head=f"{GRAPH}/finetune/head.pt",
        protected=expand(f"{RESULTS}/{{{{dataset}}}}/protect/{{method}}.pt", method=MECHANISMS),
    output:
        rows=files(LINK_PROTECTION_TABLE, ["{dataset}"], AUDITED),
        scores=files(LINK_PROTECTION_SCORE_TABLE, ["{dataset}"], AUDITED),
    params:
        library=library("link_protect.py"),
        expect=lambda w: expect(release_records(w.dataset, MECHANISMS)),
        targets=" ".join(AUDITED),
        mlp=as_json(config.get("link_stealing", {}).get("attack_mlp", {})),
        seed=stage_seed("link_protect"),
        threads_option=threads_option("link_protect"),
    log:
        f"{GRAPH}/logs/link_protect.log",
    benchmark:
        f"{GRAPH}/benchmarks/link_protect.tsv"
    threads: torch_threads("link_protect")
    resources:
        mem_mb=job_memory("link_protect"),
        runtime=job_runtime("link_protect"),
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --dataset {wildcards.dataset} --graph {input.graph:q} --embeddings {input.embeddings:q}"
        " --head {input.head:q} --targets {params.targets} --protected {input.protected:q} --attack-mlp {params.mlp}"
        " --seed {params.seed} --out {output.rows:q} --scores {output.scores:q} {params.threads_option}"
        " {params.expect} 2> {log:q}"


rule link_protection_table:
    """Part B: all link-stealing rows of one graph in one tidy CSV."""
    wildcard_constraints:
        dataset=one_of(GRAPHS),
    input:
        script=script("merge_csv.py"),
        parts=[LINK_PROTECTION_TABLE.path(RESULTS, "{dataset}", t) for t in ["none"] + MECHANISMS],
    output:
        LINK_PROTECTION_TABLE.path(RESULTS, "{dataset}"),
    params:
        library=library("merge_csv.py"),
        table=LINK_PROTECTION_TABLE.name,
        expect=lambda w: expect(grid(LINK_PROTECTION_TABLE, [w.dataset], ["none"] + MECHANISMS)),
    log:
        f"{GRAPH}/logs/link_protection_table.log",
    localrule: True
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --table {params.table} --out {output:q} {input.parts:q} {params.expect} 2> {log:q}"


rule graph_figures:
    """Part B: utility loss, node MIA and link-stealing AUC vs ε per mechanism, a column per graph."""
    input:
        script=script("plot_graph_protection.py"),
        utility=files(UTILITY_TABLE, PROTECTED_GRAPHS),
        mia=files(MIA_TABLE, PROTECTED_GRAPHS),
        mia_scores=mia_scores(PROTECTED_GRAPHS),
        links=files(LINK_PROTECTION_TABLE, PROTECTED_GRAPHS),
    output:
        png=report(
            f"{RESULTS}/figures/graph_protection.png", caption="../report/graph_protection.rst", category="Figures"
        ),
        pdf=f"{RESULTS}/figures/graph_protection.pdf",
    params:
        library=library("plot_graph_protection.py"),
        expect=expect(
            grid(UTILITY_TABLE, PROTECTED_GRAPHS),
            grid(MIA_TABLE, PROTECTED_GRAPHS),
            grid(LINK_PROTECTION_TABLE, PROTECTED_GRAPHS),
        ),
    log:
        f"{RESULTS}/logs/graph_figures.log",
    localrule: True
    conda:
        GRAPH_ENV
    shell:
        "python {input.script:q} --utility {input.utility:q} --mia {input.mia:q}"
        " --mia-scores {input.mia_scores:q} --links {input.links:q}"
        " --out {output.png:q} {output.pdf:q} {params.expect} 2> {log:q}"
