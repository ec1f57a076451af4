"""The reference attacks' dispatch (privssl.attacks.reference_attacks), the reference counts of the
comparison (privssl.attacks.mia_spec), and its figure and table (privssl.reports.audit_plots),
each against what it must equal: LiRA's own scores, the definition of the counts, the rows drawn."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from privssl.artefacts.image import lira_reference_rows  # noqa: E402
from privssl.attacks.lira import lira_scores, logit_confidence  # noqa: E402
from privssl.attacks.mia_spec import REFERENCE_ATTACKS, reference_counts  # noqa: E402
from privssl.attacks.reference_attacks import References, fit_rmia, reference_scores  # noqa: E402
from privssl.attacks.rmia import choose_offline_a, label_probability, rmia_scores  # noqa: E402
from privssl.reports.audit_plots import figure_references, references_markdown  # noqa: E402


@pytest.mark.parametrize("shadows, counts", [(1, [1]), (2, [1, 2]), (4, [1, 2, 4]), (6, [1, 2, 4, 6]),
                                             (64, [1, 2, 4, 8, 16, 32, 64])])
def test_reference_counts_double_up_to_every_shadow(shadows, counts):
    assert reference_counts(shadows) == counts


def _setting(seed=0, S=6, T=3, N=40, Z=25, C=3):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(S + T, N, C, generator=g, dtype=torch.float64)
    population = torch.randn(S + T, Z, C, generator=g, dtype=torch.float64)
    labels = torch.randint(0, C, (N,), generator=g)
    z_labels = torch.randint(0, C, (Z,), generator=g)
    inside = torch.rand(S, N, generator=g) < 0.5
    return logits, population, labels, z_labels, inside, S


def test_lira_attacks_are_liras_scores_on_the_first_k_heads():
    logits, _, labels, _, inside, S = _setting()
    references = References(logits[:S], inside).first(3)
    scores, threshold = reference_scores("lira_offline_global", logits[S:], None, references, labels)
    expected = lira_scores(logit_confidence(logits[S:], labels), logit_confidence(logits[:3], labels), inside[:3],
                           "offline", "global")
    torch.testing.assert_close(scores, expected)
    assert threshold == pytest.approx(np.log(0.5))
    assert reference_scores("lira_online", logits[S:], None, references, labels)[1] == 0.0


def test_rmias_threshold_is_fitted_leaving_each_of_the_attackers_first_heads_out():
    """The threshold by hand: heads 0–3 each scored by the other five, the score of the highest
    accuracy over their 4 × 40 candidates; not the no-fit 0.5, which a mix of IN and OUT references
    does not calibrate."""
    logits, population, labels, z_labels, inside, S = _setting(seed=3)
    pop_p = label_probability(population, z_labels)
    references = fit_rmia(References(logits[:S], inside, pop_p[:S]), labels, gamma=1.0)
    probability = label_probability(logits[:S], labels)
    for variant in ("online", "offline"):
        scores, members = [], []
        for i in range(4):
            rest = [j for j in range(S) if j != i]
            scores.append(rmia_scores(probability[i:i + 1], probability[rest], inside[rest], pop_p[i:i + 1],
                                      pop_p[rest], variant, references.rmia_a)[0].numpy())
            members.append(inside[i].numpy())
        scores, members = np.concatenate(scores), np.concatenate(members)
        accuracy = lambda t: ((scores >= t) == members).mean()  # noqa: E731
        fitted = references.rmia_thresholds[variant]
        assert accuracy(fitted) == max(accuracy(t) for t in [*np.unique(scores), np.inf])
        assert accuracy(fitted) >= accuracy(0.5)
    assert references.first(2).rmia_thresholds == references.rmia_thresholds


def test_rmia_attacks_use_the_population_and_the_attackers_a():
    logits, population, labels, z_labels, inside, S = _setting()
    pop_p = label_probability(population, z_labels)
    references = fit_rmia(References(logits[:S], inside, pop_p[:S]), labels, gamma=1.0)
    a = choose_offline_a(label_probability(logits[:S], labels), inside, pop_p[:S])
    assert references.rmia_a == a
    k = references.first(2)
    assert k.rmia_a == a and k.population.shape[0] == 2
    for attack, variant in (("rmia_online", "online"), ("rmia_offline", "offline")):
        scores, threshold = reference_scores(attack, logits[S:], pop_p[S:], k, labels)
        expected = rmia_scores(label_probability(logits[S:], labels), label_probability(logits[:2], labels),
                               inside[:2], pop_p[S:], pop_p[:2], variant, a)
        torch.testing.assert_close(scores, expected)
        assert threshold == references.rmia_thresholds[variant]
    with pytest.raises(ValueError, match="needs the population"):
        reference_scores("rmia_online", logits[S:], pop_p[S:], References(logits[:S], inside, pop_p[:S]), labels)
    with pytest.raises(ValueError, match="unknown reference attack 'loss'"):
        reference_scores("loss", logits[S:], None, references, labels)


def _rows():
    rows = []
    for dataset in ("toy", "other"):
        for k in (1, 2, 4):
            for i, attack in enumerate(("lira_offline", "rmia_offline")):
                auc = 0.5 + 0.01 * k + 0.05 * i
                rows.append({"dataset": dataset, "attack": attack, "references": k, "targets": 2, "rmia_a": np.nan,
                             "n_members": 40, "n_nonmembers": 40, "records": 40, "draws": 2, "auc": auc,
                             "auc_lo": auc - 0.02, "auc_hi": auc + 0.03, "tpr_at_1pct_fpr": 0.1 * k,
                             "tpr_at_1pct_fpr_lo": 0.05 * k, "tpr_at_1pct_fpr_hi": 0.15 * k, "fp_at_1pct_fpr": k,
                             "tpr_at_0.1pct_fpr": 0.01 * k + i, "tpr_at_0.1pct_fpr_lo": 0.0,
                             "tpr_at_0.1pct_fpr_hi": 0.02 * k + i, "fp_at_0.1pct_fpr": 7 * k + i})
    return pd.DataFrame(rows)


def test_the_figure_draws_each_attacks_auc_and_lowest_fpr_tpr_with_their_intervals():
    rows = _rows()
    fig = figure_references(rows)
    axes = fig.axes
    assert len(axes) == 4  # two datasets × (AUC, TPR)
    for ax, (dataset, metric) in zip(axes, [("toy", "auc"), ("toy", "tpr_at_0.1pct_fpr"), ("other", "auc"),
                                            ("other", "tpr_at_0.1pct_fpr")]):
        assert sorted(c.get_label() for c in ax.containers) == ["lira_offline", "rmia_offline"]
        for container in ax.containers:
            attack = container.get_label()
            data_line, _, (bars,) = container.lines
            own = rows[(rows.dataset == dataset) & (rows.attack == attack)].sort_values("references")
            np.testing.assert_allclose(np.asarray(data_line.get_xdata(), float), own.references)
            np.testing.assert_allclose(np.asarray(data_line.get_ydata(), float), own[metric])
            segments = np.array([s[:, 1] for s in bars.get_segments()])
            np.testing.assert_allclose(segments, own[[f"{metric}_lo", f"{metric}_hi"]].to_numpy())


def test_the_table_lists_every_row_at_the_lowest_fpr_with_its_false_positives():
    text = references_markdown(_rows())
    assert "TPR at 0.1 % FPR" in text and "1 % FPR" not in text.replace("0.1 % FPR", "")
    lines = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(lines) == 12
    assert "| 4 | rmia_offline | 0.590 [0.570, 0.620] | 1.0400 [0.0000, 1.0800] (29) |" in lines


def test_the_grid_expects_every_reference_attack_at_every_count():
    config = {"attack": {"lira": {"attacks": ["lira_online", "loss", "rmia_offline"], "shadows": 5}}}
    assert lira_reference_rows(config, "toy") == [{"dataset": ["toy"], "attack": ["lira_online", "rmia_offline"],
                                                     "references": [1, 2, 4, 5]}]
    assert set(REFERENCE_ATTACKS) == {"lira_online", "lira_offline", "lira_online_global", "lira_offline_global",
                                      "rmia_online", "rmia_offline", "calibrated_loss"}


def test_the_schemas_attack_enum_is_the_list_of_attacks():
    # an attack named in privssl.attacks.mia_spec but missing from the schema could not be
    # configured; one left in the schema after leaving mia_spec would fail in its job, not up front
    from pathlib import Path

    import yaml

    from privssl.attacks.mia_spec import METRIC_ATTACKS

    schema = yaml.safe_load((Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml").read_text())
    lira = schema["properties"]["attack"]["properties"]["lira"]["properties"]
    assert lira["attacks"]["items"]["enum"] == [*REFERENCE_ATTACKS, *METRIC_ATTACKS]


def test_an_rmia_row_without_its_a_is_refused(tmp_path):
    from privssl.artefacts.image import LIRA_REFERENCES
    from privssl.artefacts.specs import ArtefactError
    from privssl.artefacts.tables import load_csv_file

    rows = _rows().assign(rmia_a=lambda f: np.where(f.attack == "rmia_offline", 0.3, np.nan), accuracy=0.55,
                          accuracy_lo=0.5, accuracy_hi=0.6, **{"tpr_at_0.1pct_fpr": 0.01, "tpr_at_0.1pct_fpr_hi": 0.02})
    rows.to_csv(tmp_path / "ok.csv", index=False)
    assert len(load_csv_file(tmp_path / "ok.csv", LIRA_REFERENCES)) == len(rows)
    rows.loc[rows.attack == "rmia_offline", "rmia_a"] = np.nan
    rows.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ArtefactError, match="rmia_a"):
        load_csv_file(tmp_path / "bad.csv", LIRA_REFERENCES)
