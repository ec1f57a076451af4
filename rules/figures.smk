rule figures:
    """Fig. 1 (utility loss vs ε) and Fig. 2 (MIA accuracy vs ε and vs utility loss), from CSV only."""
    input:
        script=script("plot_figures.py"),
        utility=expand(f"{RESULTS}/{{dataset}}/utility.csv", dataset=DATASETS),
        mia=expand(f"{RESULTS}/{{dataset}}/mia.csv", dataset=DATASETS),
    output:
        fig1_png=report(f"{RESULTS}/figures/fig1_utility_loss.png", caption="../report/fig1.rst", category="Figures"),
        fig1_pdf=f"{RESULTS}/figures/fig1_utility_loss.pdf",
        fig2_png=report(f"{RESULTS}/figures/fig2_mia.png", caption="../report/fig2.rst", category="Figures"),
        fig2_pdf=f"{RESULTS}/figures/fig2_mia.pdf",
    log:
        f"{RESULTS}/logs/figures.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script} --utility {input.utility} --mia {input.mia} --fig1 {output.fig1_png} {output.fig1_pdf}"
        " --fig2 {output.fig2_png} {output.fig2_pdf} 2> {log}"


rule table1:
    """Table 1 of the paper: |D|, |d|, m, Δ1, Δ2 per dataset."""
    input:
        script=script("make_table1.py"),
        sensitivity=expand(f"{RESULTS}/{{dataset}}/sensitivity.json", dataset=DATASETS),
    output:
        csv=report(f"{RESULTS}/tables/table1.csv", caption="../report/table1.rst", category="Tables"),
        md=f"{RESULTS}/tables/table1.md",
    params:
        datasets=" ".join(DATASETS),
    log:
        f"{RESULTS}/logs/table1.log",
    localrule: True
    conda:
        ENV
    shell:
        "python {input.script} --datasets {params.datasets} --sensitivity {input.sensitivity}"
        " --csv {output.csv} --md {output.md} 2> {log}"
