"""The paper's figures, drawn from the tidy CSVs of the protect and attack rules only, and the
one way every figure of the workflow is written (`save_figure`).

Every method of the release-method registry keeps its colour and marker in every figure; the
line style says what its ε means at that point (`KIND_LINESTYLE`: solid proven DP, dashed random
DP, dash-dot heuristic DP, dotted no guarantee), so a curve whose claim changes along ε changes style there.

Every band or error bar on a release's test accuracy, utility loss or attack accuracy is one kind
of interval: 95 %, over all draws of the release, with the record as the independent unit (the
draws decide the same records; privssl.attacks.repeated through release_table's estimators). Each
panel says so, with the records and draws behind its points.

A figure is written only when every text and legend on it lies inside its canvas (`check_canvas`):
whatever runs past an edge is cut off in the file, which nothing else would notice. The figures
make room for their legends (`legend_below`, `fit_width`) instead of cropping the file to its
content, so a figure's size is that of its content and the check has something to hold it to."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from privssl.attacks.repeated import Estimate  # noqa: E402
from privssl.io import atomic_path  # noqa: E402
from privssl.release.methods import KIND_LINESTYLE, METHODS, REGISTRY, release_method  # noqa: E402
from privssl.reports.release_table import (  # noqa: E402
    attach_kinds,
    mia_accuracy,
    noise_free,
    paper_attack,
    point_kinds,
    pooled_accuracy,
    release_utility_loss,
    releases,
    test_accuracy,
)

KIND_KEY = {"-": "proven DP (ε-DP, (ε, δ)-DP)", "--": "random DP (sampled Δ)", "-.": "heuristic DP (Δ not proven)",
            ":": "no guarantee"}


# Metadata that keeps a figure's bytes a function of the figure: a PDF's CreationDate is the time
# of writing unless removed; a PNG carries no time (only the Matplotlib version, as both do).
FIGURE_METADATA = {"pdf": {"CreationDate": None}, "png": {}}
SAVE_DPI = 150
# Text extents are rounded to whole pixels and anti-aliased over one more: a pixel or two past the
# edge is not a visible cut.
CANVAS_TOLERANCE_PX = 2.0
FIT_MARGIN_IN = 0.1  # between a legend or title that sets the figure's width and the canvas edge


def save_figure(fig: plt.Figure, paths: list[str]) -> None:
    """Check that nothing on the figure leaves its canvas (`check_canvas`), then write it to each
    path (its format from the suffix: png, pdf) atomically; the figure is closed either way."""
    try:
        for path in paths:
            fmt = str(path).rsplit(".", 1)[-1]
            if fmt not in FIGURE_METADATA:
                raise ValueError(f"{path}: figures are written as {' or '.join(FIGURE_METADATA)} only")
        check_canvas(fig)
        for path in paths:
            fmt = str(path).rsplit(".", 1)[-1]
            with atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=SAVE_DPI, format=fmt, metadata=FIGURE_METADATA[fmt])
    finally:
        plt.close(fig)


def _quote(text: str, limit: int = 48) -> str:
    """A text on one line, shortened, quoted: how an error message names an artist."""
    line = " ".join(str(text).split())
    return repr(line if len(line) <= limit else line[:limit - 1] + "…")


def _legend_name(legend) -> str:
    title = legend.get_title().get_text()
    entries = [t.get_text() for t in legend.get_texts() if t.get_text().strip()]
    return _quote(title or (f"{entries[0]}, …" if entries else "(empty)"))


def canvas_artists(fig: plt.Figure) -> list[tuple[str, object]]:
    """(name, artist) of everything a reader reads on the figure: its legends and texts (the
    suptitle among them), and per drawn panel its title, legend, texts, and, where its axes are
    on, each axis's label and tick labels (an Axis: its tick labels, label and offset text)."""
    named: list[tuple[str, object]] = [(f"figure legend {_legend_name(legend)}", legend) for legend in fig.legends]
    named += [(f"figure text {_quote(text.get_text())}", text) for text in fig.texts]
    for number, ax in enumerate(fig.axes, start=1):
        if not ax.get_visible():
            continue
        panel = f"panel {number}" + (f" ({_quote(ax.get_title())})" if ax.get_title() else "")
        named.append((f"title of {panel}", ax.title))
        if ax.get_legend() is not None:
            named.append((f"legend {_legend_name(ax.get_legend())} of {panel}", ax.get_legend()))
        named += [(f"text {_quote(text.get_text())} of {panel}", text) for text in ax.texts]
        if ax.axison:  # ax.axis("off") hides both axes without marking them invisible
            for axis in (ax.xaxis, ax.yaxis):
                named.append((f"{axis.axis_name}-axis label {_quote(axis.label.get_text())} of {panel}", axis.label))
                named.append((f"{axis.axis_name}-axis tick labels of {panel}", axis))
    return named


def _extent(artist, renderer):
    """The artist's drawn box in pixels (clipping applied), or None where nothing is drawn."""
    if not artist.get_visible() or (isinstance(artist, Text) and not artist.get_text().strip()):
        return None
    box = artist.get_tightbbox(renderer)  # an Axis: its tick labels, label and offset text
    if box is None or not np.isfinite(box.extents).all() or (box.width <= 0 and box.height <= 0):
        return None  # clipped away, or an annotation whose point is outside its panel (not drawn)
    return box


def canvas_overflows(fig: plt.Figure, dpi: float = SAVE_DPI,
                     tolerance: float = CANVAS_TOLERANCE_PX) -> list[str]:
    """What leaves the canvas of the figure drawn at `dpi` (the layout runs at draw time), each
    as '<artist> overflows the canvas on the <side> by <pixels> px'."""
    fig.set_dpi(dpi)
    fig.draw_without_rendering()  # the layout and every position, without rasterising
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    found = []
    for name, artist in canvas_artists(fig):
        box = _extent(artist, renderer)
        if box is None:
            continue
        sides = {"left": canvas.x0 - box.x0, "right": box.x1 - canvas.x1, "bottom": canvas.y0 - box.y0,
                 "top": box.y1 - canvas.y1}
        over = [f"{side} by {pixels:.1f} px" for side, pixels in sides.items() if pixels > tolerance]
        if over:
            found.append(f"{name} overflows the canvas on the {', '.join(over)}")
    return found


def check_canvas(fig: plt.Figure, dpi: float = SAVE_DPI, tolerance: float = CANVAS_TOLERANCE_PX) -> None:
    """Refuse (ValueError) a figure on which a legend, title, axis or tick label or text runs past
    the canvas by more than `tolerance` pixels at `dpi`, naming each and by how much."""
    problems = canvas_overflows(fig, dpi, tolerance)
    if problems:
        raise ValueError(f"the figure ({fig.bbox.width:.0f} × {fig.bbox.height:.0f} px at {dpi:g} dpi) would be cut "
                         f"off: " + "; ".join(problems))


def fit_width(fig: plt.Figure, margin: float = FIT_MARGIN_IN) -> None:
    """Widen the figure (never narrow it) to its widest figure legend or figure text (suptitle)
    plus a margin each side: constrained layout shrinks the panels to the canvas, but not a legend
    or a title, which would run past both edges of a figure narrower than itself."""
    renderer = fig.canvas.get_renderer()
    widths = [artist.get_window_extent(renderer).width for artist in [*fig.legends, *fig.texts]
              if artist.get_visible()]
    width, height = fig.get_size_inches()
    needed = max(widths, default=0.0) / fig.dpi + 2 * margin
    if needed > width:
        fig.set_size_inches(needed, height)


def legend_below(fig: plt.Figure, handles: list, ncol: int, fontsize: float = 7, **options):
    """A figure legend below the panels; the figure grows by its height, so the panels keep theirs,
    and widens where the legend is wider than it (`fit_width`)."""
    legend = fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=fontsize, **options)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + legend.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi)
    fit_width(fig)
    return legend


def _mean_std(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Mean and std over runs per (mechanism, ε), sorted by ε; one run has no spread (std 0). Only
    for the link-stealing AUC, whose rows carry no per-record decisions to cluster."""
    return frame.groupby(["mechanism", "eps"])[column].agg(["mean", "std"]).fillna(0.0).reset_index()


ESTIMATE_COLUMNS = ["mechanism", "eps", "guarantee_kind", "value", "lo", "hi", "records", "draws"]


def estimates(rows: pd.DataFrame, estimator) -> pd.DataFrame:
    """Per (mechanism, ε) of the rows (ε ascending within a mechanism): the estimator's value, its
    95 % interval (lo, hi), the records and draws behind it, and the release's guarantee kind
    (from the rows: utility rows, or MIA rows after attach_kinds)."""
    table = [{"mechanism": mechanism, "eps": eps, "guarantee_kind": group.guarantee_kind.iloc[0],
              **_columns(estimator(group))}
             for (mechanism, eps), group in rows.groupby(["mechanism", "eps"], sort=True)]
    return pd.DataFrame(table, columns=ESTIMATE_COLUMNS)


def _columns(estimate: Estimate) -> dict:
    return {"value": estimate.value, "lo": estimate.lo, "hi": estimate.hi, "records": estimate.n,
            "draws": estimate.draws}


def _span(values) -> str:
    """One count, or the range of several: '300', '2–5'."""
    values = sorted({int(v) for v in values})
    if not values:
        return "?"
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def interval_note(stats: pd.DataFrame, records: str, drawn_as: str = "band") -> str:
    """What a band or bar is, and over what, in two lines: '<band>: 95 % CI, clustered by record,
    / <n> <records> × <R> draws'."""
    return f"{drawn_as}: 95 % CI, clustered by record,\n{_span(stats.records)} {records} × {_span(stats.draws)} draws"


def _title(ax, heading: str, note: str) -> None:
    """A panel title of a heading and the interval's note, small enough to stay over its panel."""
    ax.set_title(f"{heading}\n{note}", fontsize=9)


def kind_runs(kinds) -> list[tuple[str, slice]]:
    """Maximal runs of consecutive points with one guarantee kind, as (kind, slice)."""
    kinds, runs, start = list(kinds), [], 0
    for i in range(1, len(kinds) + 1):
        if i == len(kinds) or kinds[i] != kinds[start]:
            runs.append((kinds[start], slice(start, i)))
            start = i
    return runs


def _draw(ax, mechanism: str, x, stats: pd.DataFrame, spread: str | None = "band", x_interval=None) -> None:
    """One method's curve (`stats`: value, lo, hi, guarantee_kind per point) in its registry colour
    and marker, a segment per run of one guarantee kind in that kind's line style, so a change of
    claim along ε shows on the curve itself; its interval as a band or as error bars, and, with
    `x_interval` (lo, hi), the x value's interval as horizontal bars."""
    method = release_method(mechanism)
    x, value = np.asarray(x, float), stats["value"].to_numpy(float)
    lo, hi = stats["lo"].to_numpy(float), stats["hi"].to_numpy(float)
    for kind, run in kind_runs(stats.guarantee_kind):
        ax.plot(x[run], value[run], color=method.colour, marker=method.marker, ls=KIND_LINESTYLE[kind],
                label=f"_{mechanism} ({kind})", gid=f"{mechanism}:{kind}")
        if spread == "band":
            ax.fill_between(x[run], lo[run], hi[run], color=method.colour, alpha=0.2, gid=f"band/{mechanism}:{kind}")
        elif spread == "bars":
            xerr = None
            if x_interval is not None:
                x_lo, x_hi = (np.asarray(v, float)[run] for v in x_interval)
                xerr = [np.maximum(x[run] - x_lo, 0), np.maximum(x_hi - x[run], 0)]
            ax.errorbar(x[run], value[run], [np.maximum(value[run] - lo[run], 0), np.maximum(hi[run] - value[run], 0)],
                        xerr=xerr, fmt="none", ecolor=method.colour, gid=f"bars/{mechanism}:{kind}")


def _noise_free_lines(ax, utility: pd.DataFrame, dataset: str, column: str) -> None:
    """Each method's noise-free limit (its ε = ∞ rows) as a thin dotted line in its colour, so
    that a reader sees what the method loses to its training and what to its noise."""
    for row in noise_free(utility[utility.dataset == dataset]).itertuples(index=False):
        ax.axhline(getattr(row, column), color=release_method(row.mechanism).colour, ls=(0, (1, 3)), lw=1.2,
                   gid=f"noise_free/{row.mechanism}")


NOISE_FREE_KEY = "thin, dotted, in a method's colour:\nits noise-free limit (ε = ∞)"


def _methods(frame: pd.DataFrame) -> list[str]:
    """The methods present, in registry order (an unknown name is an error, not a default style)."""
    return sorted({release_method(m).name for m in frame.mechanism if m != "none"}, key=METHODS.index)


def _blank() -> Line2D:
    return Line2D([], [], ls="none", label=" ")


def _figure_legend(fig: plt.Figure, methods: list[str], title: str = "line style: guarantee") -> None:
    """Below the panels, two columns: left, each method's colour and marker; right, what each
    line style says of the claim, and the noise-free line. Each column is padded with blank
    entries to the same length, so that no entry of one spills into the other."""
    left = [Line2D([], [], ls="none", label="— method: colour, marker —")]
    left += [Line2D([], [], color=REGISTRY[m].colour, marker=REGISTRY[m].marker, ls="none", label=REGISTRY[m].label)
             for m in methods]
    right = [Line2D([], [], ls="none", label=f"— {title} —")]
    right += [Line2D([], [], color="dimgrey", ls=style, label=text) for style, text in KIND_KEY.items()]
    right.append(Line2D([], [], color="dimgrey", ls=(0, (1, 3)), lw=1.2, label=NOISE_FREE_KEY))
    rows = max(len(left), len(right))
    handles = left + [_blank() for _ in range(rows - len(left))] + right + [_blank() for _ in range(rows - len(right))]
    legend_below(fig, handles, ncol=2)


PANEL_WIDTH, PANEL_HEIGHT = 5.0, 4.2  # inches per panel, before the legend below adds its own height


def _panels(rows: int, cols: int, height: float) -> tuple[plt.Figure, np.ndarray]:
    # constrained layout keeps the figure legends ("outside ...") clear of the panels
    return plt.subplots(rows, cols, figsize=(PANEL_WIDTH * cols, height), squeeze=False, layout="constrained")


def _datasets(frame: pd.DataFrame) -> list[str]:
    datasets = list(dict.fromkeys(frame.dataset))
    if not datasets:
        raise ValueError("nothing to plot: no rows")
    return datasets


def figure1(utility: pd.DataFrame) -> plt.Figure:
    """Fig. 1: utility loss vs ε per method, every release method (post-hoc and training-time),
    with its 95 % interval clustered by test record over the release's draws, a panel per dataset."""
    point_kinds(utility)  # one claim per release, every kind known
    datasets = _datasets(utility)
    fig, axes = _panels(1, len(datasets), PANEL_HEIGHT)
    for ax, dataset in zip(axes[0], datasets):
        stats = estimates(releases(utility[utility.dataset == dataset]), release_utility_loss)
        for mechanism, group in stats.groupby("mechanism", sort=False):
            _draw(ax, mechanism, group.eps, group)
        _noise_free_lines(ax, utility, dataset, "utility_loss")
        ax.set(xscale="log", xlabel="privacy budget ε", ylabel="utility loss (1 − accuracy / non-private accuracy)")
        _title(ax, dataset, interval_note(stats, "test records"))
        ax.axhline(0, color="grey", lw=0.8)
    _figure_legend(fig, _methods(utility))
    return fig


def figure2(utility: pd.DataFrame, mia: pd.DataFrame) -> plt.Figure:
    """Fig. 2: top, MIA accuracy vs ε with its 95 % interval clustered by queried record over the
    release's draws; bottom, MIA accuracy vs utility loss, both intervals as bars. The paper's
    shadow-MLP attack in its adaptive form (the shadow released like the victim)."""
    attacked, mia = attach_kinds(paper_attack(mia), utility), paper_attack(mia)
    datasets = _datasets(mia)
    fig, axes = _panels(2, len(datasets), 2 * PANEL_HEIGHT)
    for col, dataset in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        clean = pooled_accuracy(mia[(mia.dataset == dataset) & (mia.mechanism == "none")])
        attack_stats = estimates(attacked[attacked.dataset == dataset], mia_accuracy)
        loss_stats = estimates(releases(utility[utility.dataset == dataset]), release_utility_loss)
        for mechanism, group in attack_stats.groupby("mechanism", sort=False):
            _draw(top, mechanism, group.eps, group)
            joined = group.merge(loss_stats[["mechanism", "eps", "value", "lo", "hi"]], on=["mechanism", "eps"],
                                 suffixes=("", "_loss"), validate="one_to_one")
            _draw(bottom, mechanism, joined.value_loss, joined, spread="bars",
                  x_interval=(joined.lo_loss, joined.hi_loss))
        for ax in (top, bottom):
            ax.axhline(clean["accuracy"], color="black", ls="-.", lw=1, gid="unprotected",
                       label=f"unprotected {clean['accuracy']:.3f} [{clean['lo']:.3f}, {clean['hi']:.3f}]")
            ax.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess", gid="chance")
            ax.set_ylabel("MIA accuracy (adaptive shadow MLP)")
            ax.legend(fontsize=7)
        top.set(xscale="log", xlabel="privacy budget ε")
        _title(top, f"{dataset}: MIA accuracy vs ε", interval_note(attack_stats, "queried records"))
        bottom.set(xlabel="utility loss (bars: 95 % CI, clustered by test record)")
        _title(bottom, f"{dataset}: MIA accuracy vs utility loss", interval_note(attack_stats, "queried records",
                                                                               drawn_as="vertical bars"))
    _figure_legend(fig, _methods(attacked))
    return fig


def figure3(utility: pd.DataFrame) -> plt.Figure:
    """Fig. 3, the privacy-utility frontier: test accuracy vs ε per method (post-hoc and
    training-time) with its 95 % interval clustered by test record over the release's draws, a
    panel per dataset, with the non-private head's accuracy as the reference line."""
    point_kinds(utility)
    datasets = _datasets(utility)
    fig, axes = _panels(1, len(datasets), PANEL_HEIGHT)
    for ax, dataset in zip(axes[0], datasets):
        rows = utility[utility.dataset == dataset]
        stats = estimates(releases(rows), test_accuracy)
        for mechanism, group in stats.groupby("mechanism", sort=False):
            _draw(ax, mechanism, group.eps, group)
        _noise_free_lines(ax, utility, dataset, "accuracy")
        # Every release of a dataset is measured against the same non-private head (protect rule).
        clean = rows.clean_accuracy.mean()
        ax.axhline(clean, color="black", ls="-.", lw=1, label=f"non-private head ({clean:.3f})", gid="non_private")
        ax.set(xscale="log", xlabel="privacy budget ε", ylabel="test accuracy")
        _title(ax, dataset, interval_note(stats, "test records"))
        ax.legend(fontsize=7)
    _figure_legend(fig, _methods(utility))
    return fig


LINK_ATTACKS = {  # rows of link_protection.csv drawn: (attack, distance) -> (label, line style)
    ("attack-0", "correlation"): ("Attack-0 (correlation distance)", "-"),
    ("attack-3", None): ("Attack-3 (partial graph)", "--"),
}


def graph_protection_figure(utility: pd.DataFrame, mia: pd.DataFrame, links: pd.DataFrame) -> plt.Figure:
    """Part B of the graph track: per graph (column), utility loss, node MIA accuracy and
    link-stealing AUC vs ε per mechanism; the unprotected head's value as a dash-dot line. Utility
    loss and MIA accuracy carry their 95 % intervals clustered by node over the release's draws;
    the link rows carry no per-pair decisions, so the link AUC's bars are mean ± 1 SD over runs.
    In the utility and MIA rows the line style is the guarantee kind; in the link row, the attack."""
    point_kinds(utility)
    attacked, mia = attach_kinds(paper_attack(mia), utility), paper_attack(mia)
    datasets = _datasets(utility)
    fig, axes = _panels(3, len(datasets), 3 * PANEL_HEIGHT)
    for col, dataset in enumerate(datasets):
        loss_ax, mia_ax, link_ax = axes[:, col]
        loss_stats = estimates(releases(utility[utility.dataset == dataset]), release_utility_loss)
        for mechanism, group in loss_stats.groupby("mechanism", sort=False):
            _draw(loss_ax, mechanism, group.eps, group, spread="bars")
        _noise_free_lines(loss_ax, utility, dataset, "utility_loss")
        mia_stats = estimates(attacked[attacked.dataset == dataset], mia_accuracy)
        for mechanism, group in mia_stats.groupby("mechanism", sort=False):
            _draw(mia_ax, mechanism, group.eps, group, spread="bars")
        clean = pooled_accuracy(mia[(mia.dataset == dataset) & (mia.mechanism == "none")])["accuracy"]
        mia_ax.axhline(clean, color="black", ls="-.", lw=1, label="unprotected")
        mia_ax.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess")
        graph_links = links[links.dataset == dataset]
        for (attack, distance), (attack_label, style) in LINK_ATTACKS.items():
            rows = graph_links[(graph_links.attack == attack)
                               & (graph_links.distance.isna() if distance is None else graph_links.distance == distance)]
            for mechanism, group in _mean_std(rows[rows.mechanism != "none"], "auc").groupby("mechanism", sort=False):
                method = release_method(mechanism)
                link_ax.errorbar(group.eps, group["mean"], group["std"], marker=method.marker, color=method.colour,
                                 ls=style)
            link_ax.plot([], [], color="dimgrey", ls=style, label=attack_label)  # legend key of the attack
            link_ax.axhline(rows[rows.mechanism == "none"].auc.mean(), color="black", ls=style, lw=1,
                            label=f"unprotected, {attack_label}")
        link_ax.axhline(0.5, color="grey", ls="-.", lw=0.8)
        loss_ax.set(xscale="log", ylabel="utility loss")
        _title(loss_ax, f"{dataset}: utility loss", interval_note(loss_stats, "test nodes", drawn_as="bars"))
        mia_ax.set(xscale="log", ylabel="node MIA accuracy (adaptive shadow MLP)")
        _title(mia_ax, f"{dataset}: node membership inference", interval_note(mia_stats, "queried nodes",
                                                                                 drawn_as="bars"))
        link_ax.set(xscale="log", xlabel="privacy budget ε", ylabel="link-stealing AUC")
        _title(link_ax, f"{dataset}: link stealing", "bars: mean ± 1 SD over runs (not a CI:\nthe link rows carry "
               "no per-pair decisions)")
        for ax in (mia_ax, link_ax):
            ax.legend(fontsize=6)
    _figure_legend(fig, _methods(utility), title="line style in the utility and MIA rows: guarantee")
    return fig


def link_stealing_figure(table: pd.DataFrame) -> plt.Figure:
    """Link-stealing AUC (mean ± std over runs) per attack, a panel per graph; the thesis's AUC
    for the same cell as a black tick. Transfer attacks show their best shadow graph."""
    best = table.loc[table.groupby(["dataset", "attack"], sort=False).auc_mean.idxmax()]
    datasets = list(dict.fromkeys(best.dataset))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        rows = best[best.dataset == dataset].sort_values("attack")
        positions = range(len(rows))
        ax.bar(positions, rows.auc_mean, yerr=rows.auc_std.fillna(0), color="tab:purple", alpha=0.7, label="measured")
        ax.scatter(positions, rows.thesis_auc, marker="_", s=400, color="black", zorder=3, label="thesis")
        labels = [a + (f" ({d})" if a == "attack-0" else "") + (f"\n({s})" if s else "")
                  for a, d, s in zip(rows.attack, rows.distance, rows.shadow)]
        ax.set_xticks(list(positions), labels, rotation=60, ha="right", fontsize=7)
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set(ylim=(0, 1.02), ylabel="AUC (bars: mean ± 1 SD over runs)", title=dataset)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig
