"""Thesis Ch. 4 targets and the attack protocol: supervised training, the model files, the NN
attack's input, the pairing of targets with shadows, and the rows the attack rule writes."""

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from privssl.artefacts.contrastive import (
    CONTRASTIVE,
    CONTRASTIVE_GUESSES,
    CONTRASTIVE_SCORES,
    contrastive_guess_table,
    contrastive_score_table,
    load_contrastive,
    load_contrastive_models,
)
from privssl.artefacts.specs import ArtefactError
from privssl.artefacts.tables import load_csv_file
from privssl.attacks.attribute_inference import AttributeAttackSpec, train_attribute_attack
from privssl.attacks.contrastive_privacy import (
    AttackSettings,
    Split,
    evaluate,
    nn_inputs,
    pair_models,
    shared_label_predictor,
)
from privssl.attacks.contrastive_spec import ATTRIBUTE_ATTACK, MEMBERSHIP_ATTACKS
from privssl.attacks.mia import AttackSpec, best_threshold
from privssl.io import atomic_torch_save, atomic_write_csv, atomic_write_parquet, pack_decisions, unpack_decisions
from privssl.training.contrastive_targets import (
    TargetModel,
    TargetSpec,
    TrainingSpec,
    classification_layer,
    load_models,
    train_supervised,
)
from privssl.training.encoders import build_encoder

CPU = torch.device("cpu")


def random_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 2, (n,), generator=g)


def test_supervised_training_memorises_its_training_set():
    images, labels = random_images(40, 0)  # random labels: only memorisation fits them
    encoder, layer = train_supervised("convnet", 16, images, labels, 2, TrainingSpec(60, 20, 3e-3), seed=0, device=CPU)
    model = TargetModel("supervised", None, 0, encoder, layer)
    assert float((model.predict_labels(images) == labels).float().mean()) == 1.0
    fresh, fresh_labels = random_images(200, 1)
    assert float((model.predict_labels(fresh) == fresh_labels).float().mean()) < 0.65
    again = train_supervised("convnet", 16, images, labels, 2, TrainingSpec(60, 20, 3e-3), seed=0, device=CPU)
    assert torch.equal(again[1]["weight"], layer["weight"])  # deterministic for a seed


def test_posteriors_are_the_layer_on_the_embedding():
    torch.manual_seed(0)
    encoder = build_encoder("convnet", 1, 8, 8).eval()
    layer = {"weight": torch.randn(1, 8, 3, dtype=torch.float64), "bias": torch.randn(1, 3, dtype=torch.float64)}
    model = TargetModel("contrastive", 0.0, 0, encoder, layer)
    images, _ = random_images(5, 2)
    with torch.no_grad():
        expected = torch.softmax(encoder(images).double() @ layer["weight"][0] + layer["bias"][0], -1)
    assert torch.allclose(model.posteriors(images), expected)
    assert torch.equal(model.predict_labels(images), expected.argmax(-1))


def test_classification_layer_fits_separable_features():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (90,), generator=g)
    features = torch.nn.functional.one_hot(labels, 3).double() * 4 + 0.1 * torch.randn(90, 3, generator=g)
    layer = classification_layer(features, labels, 3, TrainingSpec(100, None, 0.05), seed=0)
    logits = features @ layer["weight"][0] + layer["bias"][0]
    assert float((logits.argmax(1) == labels).double().mean()) == 1.0


def test_nn_input_is_the_sorted_top_two_and_the_correctness():
    probs = torch.tensor([[[0.2, 0.5, 0.3], [0.7, 0.1, 0.2]]], dtype=torch.float64)
    labels = torch.tensor([2, 0])
    expected = torch.tensor([[[0.5, 0.3, 0.0], [0.7, 0.2, 1.0]]])
    assert torch.allclose(nn_inputs(probs, labels), expected)


def test_target_spec_always_trains_the_contrastive_model():
    cfg = {"fine_tune": {"epochs": 2, "batch_size": 8, "lr": 1e-3}, "supervised": {"epochs": 2, "batch_size": 8,
           "lr": 1e-3}, "classifier": {"epochs": 5, "lr": 0.01}, "talos": {"lambdas": [3, 1], "hidden": 8, "lr": 0.01}}
    assert TargetSpec.from_config(cfg).lambdas == (0.0, 1.0, 3.0)
    cfg["talos"]["lambdas"] = [0, 2]
    assert TargetSpec.from_config(cfg).lambdas == (0.0, 2.0)


def tiny_models(seed: int) -> list[TargetModel]:
    torch.manual_seed(seed)
    models = []
    for kind, lam in (("supervised", None), ("contrastive", 0.0), ("talos", 2.0)):
        encoder = build_encoder("convnet", 1, 8, 8).eval()
        layer = {"weight": torch.randn(1, 8, 2, dtype=torch.float64), "bias": torch.zeros(1, 2, dtype=torch.float64)}
        models.append(TargetModel(kind, lam, 0, encoder, layer))
    return models


def test_pairing_needs_a_shadow_of_every_kind_lambda_and_repeat():
    targets, shadows = tiny_models(0), tiny_models(1)
    pairs = pair_models(targets, shadows)
    assert [(t.kind, s.kind, t.lam, s.lam) for t, s in pairs] == [(t.kind, t.kind, t.lam, t.lam) for t in targets]
    with pytest.raises(ValueError, match="needs the shadow of its kind, lambda and repeat"):
        pair_models(targets, shadows[:2])


def evaluation_data() -> dict[str, Split]:
    data = {}
    for i, name in enumerate(("target_train", "target_test", "shadow_train", "shadow_test", "aux")):
        images, task = random_images(30, 10 + i)
        data[name] = Split(images, task, torch.randint(0, 4, (30,), generator=torch.Generator().manual_seed(i)), task)
    # the majority guess right on the first four members (a cell of digits only must survive the
    # CSV round trip too: the test below)
    data["target_train"].attribute[:4] = majority_of(data["aux"].attribute)
    # the members' own majority is another attribute: a baseline computed from the members
    # instead of the auxiliary set guesses that one
    data["target_train"].attribute[4:18] = (majority_of(data["aux"].attribute) + 1) % 4
    assert majority_of(data["target_train"].attribute) != majority_of(data["aux"].attribute)
    return data


def majority_of(attributes: torch.Tensor) -> int:
    return int(np.bincount(attributes.numpy()).argmax())


SETTINGS = AttackSettings(AttackSpec(hidden=4, layers=2, epochs=2, batch_size=16, lr=1e-3),
                          AttributeAttackSpec(hidden=8, epochs=2, batch_size=16), translation=1, directions=2,
                          steps=2, fpr=(0.01,), bootstrap=20)
KINDS = [("supervised", None), ("contrastive", 0.0), ("talos", 2.0)]


def varied_models(seed: int, data: dict[str, Split]) -> list[TargetModel]:
    """tiny_models whose predictions vary from image to image: the layer on the embeddings
    standardised over the data's images (a random encoder's embeddings differ little), so that a
    decision recomputed on the wrong images would differ."""
    images = torch.cat([split.images for split in data.values()])
    torch.manual_seed(seed)
    models = []
    for kind, lam in KINDS:
        encoder = build_encoder("convnet", 1, 8, 8).eval()
        with torch.no_grad():
            embeddings = encoder(images).double()
        weight = torch.randn(8, 2, dtype=torch.float64) / embeddings.std(0).clamp(min=1e-12)[:, None]
        layer = {"weight": weight[None], "bias": -(embeddings.mean(0) @ weight)[None]}
        models.append(TargetModel(kind, lam, 0, encoder, layer))
    return models


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> tuple[dict, list[TargetModel], list[TargetModel], pd.DataFrame]:
    data = evaluation_data()
    targets, shadows = varied_models(0, data), varied_models(1, data)
    rows, scored, guessed = evaluate("digits", pair_models(targets, shadows), data, 4, SETTINGS, seed=0,
                                     log=lambda _: None)
    path = tmp_path_factory.mktemp("contrastive") / "metrics.csv"
    atomic_write_csv(pd.DataFrame(rows), path)
    # the pool indices of the splits, as splits.json holds them: split s's row i is image 100·s + i
    splits = {name: list(range(100 * i, 100 * i + len(split.task))) for i, (name, split) in enumerate(data.items())}
    atomic_write_parquet(contrastive_score_table(scored, splits), path.with_name("scores.parquet"))
    atomic_write_parquet(contrastive_guess_table(guessed, splits, data["target_train"].attribute.tolist()),
                         path.with_name("guesses.parquet"))
    scores = load_csv_file(path.with_name("scores.parquet"), CONTRASTIVE_SCORES)
    guesses = load_csv_file(path.with_name("guesses.parquet"), CONTRASTIVE_GUESSES)
    # the table holds no per-record cell but the task's: its readers take the attacks' decisions
    # from the scores' calls and the guesses
    written = load_csv_file(path, CONTRASTIVE)
    assert not {"decisions", "baseline_decisions"} & set(written.columns)
    frame = load_contrastive([path], [path.with_name("scores.parquet")], [path.with_name("guesses.parquet")])
    return data, targets, shadows, frame, (scores, splits, guesses)


def test_evaluate_writes_one_valid_row_per_model_and_attack(evaluated):
    from sklearn.metrics import roc_auc_score

    data, targets, _, frame, (scores, *_) = evaluated
    assert len(frame) == 3 * (len(MEMBERSHIP_ATTACKS) + 1)
    # every membership row's scores give its AUC, and its decisions are a threshold on them
    for row in frame[frame.inference == "membership"].itertuples(index=False):
        own = scores[(scores.target == row.target) & (scores.attack == row.attack)]
        assert roc_auc_score(own.member, own.score) == pytest.approx(row.auc, abs=1e-12), (row.target, row.attack)
        called = unpack_decisions(row.decisions, 60) == own.member.to_numpy()
        assert called.all() or not called.any() or own.score[called].min() > own.score[~called].max()
    membership = frame[frame.inference == "membership"]
    assert set(membership.attack) == set(MEMBERSHIP_ATTACKS)
    assert (membership.n == 60).all() and (membership.n_members == 30).all()
    assert membership.baseline_decisions.isna().all()
    attribute = frame[frame.inference == "attribute"]
    assert (attribute.attack == ATTRIBUTE_ATTACK).all() and (attribute.n == 30).all()
    assert ((frame.accuracy_lo <= frame.accuracy) & (frame.accuracy <= frame.accuracy_hi)).all()
    # each row's decisions count its accuracy
    for row in frame.itertuples(index=False):
        assert unpack_decisions(row.decisions, int(row.n)).mean() == pytest.approx(row.accuracy)
    # each model's task accuracy is its accuracy on the target test split
    for (kind, lam), model in zip(KINDS, targets):
        rows_of = frame[frame.target == kind]
        expected = float((model.predict_labels(data["target_test"].images) == data["target_test"].task)
                         .double().mean())
        assert rows_of.task_accuracy.unique().tolist() == pytest.approx([expected])
        assert (rows_of["lambda"].isna().all() if lam is None else (rows_of["lambda"] == lam).all())


def test_evaluate_decisions_are_each_records_right_or_wrong(evaluated):
    """Recomputed here from the models: the task decisions on the held-out images, the decisions of
    two threshold attacks on the members then the non-members (thresholds fitted on the shadow),
    the attribute attack's and the majority guess's on the members."""
    data, targets, shadows, frame, (scores_file, splits, guesses) = evaluated
    members, nonmembers, aux = data["target_train"], data["target_test"], data["aux"]
    images = torch.cat([members.images, nonmembers.images])
    labels = torch.cat([members.task, nonmembers.task])
    is_member = np.r_[np.ones(30, bool), np.zeros(30, bool)]
    shadow_images = torch.cat([data["shadow_train"].images, data["shadow_test"].images])
    shadow_labels = torch.cat([data["shadow_train"].task, data["shadow_test"].task])
    scores = {"correctness": lambda m, x, y: (m.predict_labels(x) == y).double().numpy(),
              "confidence": lambda m, x, y: m.posteriors(x).gather(1, y[:, None]).squeeze(1).numpy()}
    for (kind, _), target, shadow in zip(KINDS, targets, shadows):
        rows_of = frame[frame.target == kind]
        task = (target.predict_labels(nonmembers.images) == nonmembers.task).numpy()
        assert len(set(target.predict_labels(images).tolist())) == 2 and 0 < task.sum() < 30
        for cell in rows_of.task_decisions:
            assert np.array_equal(unpack_decisions(cell, 30), task)
        for attack, score in scores.items():
            threshold = best_threshold(score(shadow, shadow_images, shadow_labels), is_member)
            right = (score(target, images, labels) >= threshold) == is_member
            (cell,) = rows_of[rows_of.attack == attack].decisions
            assert np.array_equal(unpack_decisions(cell, 60), right), (kind, attack)
            # the row's per-record scores: these scores, on its members' then its non-members' images
            own = scores_file[(scores_file.target == kind) & (scores_file.attack == attack)]
            np.testing.assert_allclose(own.score, score(target, images, labels), rtol=1e-12)
            assert np.array_equal(own.called_member, score(target, images, labels) >= threshold), (kind, attack)
            assert own.record.tolist() == splits["target_train"] + splits["target_test"]
            assert np.array_equal(own.member, is_member) and own.split.tolist() == ["target_train"] * 30 + [
                "target_test"] * 30
        attacker = train_attribute_attack(target.embed(aux.images), aux.attribute, 4, SETTINGS.attribute, seed=0)
        with torch.no_grad():
            inferred = (attacker(target.embed(members.images)).argmax(1) == members.attribute).numpy()
        assert set(scores_file[scores_file.target == kind].inference) == {"membership"}  # none for attributes
        (row,) = rows_of[rows_of.inference == "attribute"].itertuples(index=False)
        assert np.array_equal(unpack_decisions(row.decisions, 30), inferred)
        baseline = (members.attribute == majority_of(aux.attribute)).numpy()
        assert np.array_equal(unpack_decisions(row.baseline_decisions, 30), baseline)
        assert row.baseline == pytest.approx(baseline.mean())
        # the row's guesses: the attack's prediction of each member's attribute, by its pool index
        own = guesses[guesses.target == kind]
        with torch.no_grad():
            predicted = attacker(target.embed(members.images)).argmax(1).numpy()
        assert np.array_equal(own.guess, predicted) and (own.baseline_guess == majority_of(aux.attribute)).all()
        assert np.array_equal(own.attribute, members.attribute.numpy())
        assert own.record.tolist() == splits["target_train"] and own.member.all()


def test_a_decisions_column_of_digits_only_survives_the_csv_round_trip(tmp_path):
    """The task's decisions, all wrong on 8 records, pack to "00": read back as text, not the number 0."""
    rows = [{"dataset": "digits", "target": "supervised", "lambda": np.nan, "repeat": 0, "inference": inference,
             "attack": attack, "task_accuracy": 0.0, "task_accuracy_lo": 0.0, "task_accuracy_hi": 0.4, "n_test": 8,
             "task_decisions": pack_decisions(np.zeros(8, bool)),
             "n": 8, "accuracy": 0.0, "accuracy_lo": 0.0, "accuracy_hi": 0.4,
             "n_members": members, "n_nonmembers": members, "auc": auc, "auc_lo": auc, "auc_hi": auc,
             "tpr_at_1pct_fpr": auc, "tpr_at_1pct_fpr_lo": auc, "tpr_at_1pct_fpr_hi": auc, "fp_at_1pct_fpr": members,
             "baseline": baseline, "baseline_lo": baseline, "baseline_hi": baseline,
             **{f"queried_{split}_accuracy{end}": 0.5 if inference == "membership" else np.nan
                for split in ("train", "test") for end in ("", "_lo", "_hi")}}
            for inference, attack, members, auc, baseline in (("membership", "nn", 4, 0.5, np.nan),
                                                              ("attribute", ATTRIBUTE_ATTACK, np.nan, np.nan, 0.0))]
    atomic_write_csv(pd.DataFrame(rows), tmp_path / "metrics.csv")
    frame = load_csv_file(tmp_path / "metrics.csv", CONTRASTIVE)
    assert frame.task_decisions.tolist() == ["00", "00"]


def model_file(tmp_path, **changes):
    torch.manual_seed(0)
    encoder = build_encoder("convnet", 1, 8, 8)
    record = {"kind": "talos", "lambda": 2.0, "repeat": 0, "encoder": encoder.state_dict(),
              "layer": {"weight": torch.randn(1, 8, 2, dtype=torch.float64), "bias": torch.zeros(1, 2,
                                                                                              dtype=torch.float64)},
              "membership": {"encoder": None, "layer": {"weight": torch.randn(1, 8, 10, dtype=torch.float64),
                                                        "bias": torch.zeros(1, 10, dtype=torch.float64)}}}
    record |= changes
    bundle = {"role": "target", "dataset": "digits", "encoder": "convnet", "width": 8, "in_channels": 1,
              "image_size": 8, "n_task": 2, "membership_task": "class", "n_membership_task": 10, "models": [record]}
    path = tmp_path / "models.pt"
    atomic_torch_save(bundle, path)
    return path


def test_model_files_load_back_into_the_same_models(tmp_path):
    path = model_file(tmp_path)
    (model,) = load_models(load_contrastive_models(path, "target", "digits"), CPU)
    assert (model.kind, model.lam, model.repeat) == ("talos", 2.0, 0)
    images, _ = random_images(4, 0)
    assert model.posteriors(images).shape == (4, 2)
    # the membership model: the same encoder, its own layer to the membership task's 10 classes
    assert model.membership.encoder is model.encoder and model.membership_model().posteriors(images).shape == (4, 10)


@pytest.mark.parametrize("changes, field", [
    ({"lambda": None}, "models[0].lambda"),  # a Talos model without its λ
    ({"kind": "supervised"}, "models[0].lambda"),  # a supervised model with one
    ({"layer": {"weight": torch.full((1, 8, 2), math.nan, dtype=torch.float64),
                "bias": torch.zeros(1, 2, dtype=torch.float64)}}, "models[0].layer.weight"),
    ({"layer": {"weight": torch.zeros(1, 8, 3, dtype=torch.float64),
                "bias": torch.zeros(1, 2, dtype=torch.float64)}}, "models[0].layer.weight"),
    ({"membership": {"encoder": None, "layer": {"weight": torch.zeros(1, 8, 2, dtype=torch.float64),
                                                "bias": torch.zeros(1, 10, dtype=torch.float64)}}},
     "models[0].membership.layer.weight"),  # a layer to the task's classes, not the membership task's
    ({"membership": {"encoder": build_encoder("convnet", 1, 8, 8).state_dict(),
                     "layer": {"weight": torch.zeros(1, 8, 10, dtype=torch.float64),
                               "bias": torch.zeros(1, 10, dtype=torch.float64)}}},
     "models[0].membership.encoder"),  # a Talos model's encoder serves both tasks
    ({"membership": None}, "models[0].membership"),
])
def test_a_corrupted_model_file_is_refused_naming_the_field(tmp_path, changes, field):
    with pytest.raises(ArtefactError, match=re.escape(f"field '{field}'")):
        load_contrastive_models(model_file(tmp_path, **changes), "target", "digits")


@pytest.mark.parametrize("role, dataset, field", [("shadow", "digits", "role"), ("target", "cifar10", "dataset")])
def test_a_model_file_of_another_role_or_dataset_is_refused(tmp_path, role, dataset, field):
    # `cp shadow_models.pt target_models.pt` is well-formed: only what the file records tells it apart
    with pytest.raises(ArtefactError, match=re.escape(f"field '{field}': 'target'" if field == "role" else
                                                      f"field '{field}': 'digits'")):
        load_contrastive_models(model_file(tmp_path), role, dataset)


def test_a_restarted_training_reuses_every_finished_model(tmp_path):
    from privssl.training.contrastive_targets import RoleJob, RoleSet, train_targets
    from privssl.training.simclr import Augmentation, SimCLRSpec

    images, task = random_images(24, 3)
    attribute = torch.randint(0, 3, (24,), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    public = {"encoder": "convnet", "width": 8, "state": build_encoder("convnet", 1, 8, 8).state_dict()}
    simclr = SimCLRSpec(encoder="convnet", width=8, augmentation=Augmentation(0.5, 0.3, 0.1, False))
    spec = TargetSpec(TrainingSpec(2, 12, 1e-3), TrainingSpec(2, 12, 1e-3), TrainingSpec(5, None, 0.01),
                      (0.0, 1.0), 8, 0.01)
    run = lambda log: train_targets(RoleSet(images, task, 2, attribute, 3), public, simclr, spec, 1,  # noqa: E731
                                    RoleJob(7, CPU, tmp_path / "checkpoints", log))
    first, history = run(lambda _: None)
    assert [(m["kind"], m["lambda"]) for m in first] == [("supervised", None), ("contrastive", 0.0), ("talos", 1.0)]
    assert len(history) == 2 * 2  # two contrastive trainings of two epochs
    messages = []
    second, _ = run(messages.append)
    assert any("supervised model from" in m for m in messages)
    assert sum("resumed" in m for m in messages) == 2  # both contrastive trainings from their last epoch
    for a, b in zip(first, second):
        for name, value in a["encoder"].items():
            assert torch.equal(value, b["encoder"][name]), (a["kind"], name)
        assert torch.equal(a["layer"]["weight"], b["layer"]["weight"])
    # and the models file has the same bytes, as a cluster rerun after scancel must give
    atomic_torch_save({"models": first}, tmp_path / "first.pt")
    atomic_torch_save({"models": second}, tmp_path / "second.pt")
    assert (tmp_path / "first.pt").read_bytes() == (tmp_path / "second.pt").read_bytes()


def test_talos_reads_a_resnet18_representation(tmp_path):
    """Talos's classifier C takes the encoder's representation: 512 wide for ResNet-18, whatever
    `width` (the convnet's) says; it read `width` and failed on every ResNet-18 run."""
    from privssl.training.contrastive_targets import RoleJob, RoleSet, train_targets
    from privssl.training.simclr import Augmentation, SimCLRSpec

    generator = torch.Generator().manual_seed(0)
    images, task = torch.rand(12, 3, 8, 8, generator=generator), torch.arange(12) % 2
    attribute = torch.arange(12) % 3
    torch.manual_seed(0)
    public = {"encoder": "resnet18", "width": 8, "state": build_encoder("resnet18", 3, 8, 8).state_dict()}
    simclr = SimCLRSpec(encoder="resnet18", width=8, augmentation=Augmentation(0.5, 0.3, 0.1, False))
    spec = TargetSpec(TrainingSpec(1, 12, 1e-3), TrainingSpec(1, 12, 1e-3), TrainingSpec(1, None, 0.01),
                      (1.0,), 8, 0.01)
    models, history = train_targets(RoleSet(images, task, 2, attribute, 3), public, simclr, spec, 1,
                                    RoleJob(7, CPU, tmp_path / "checkpoints", lambda _: None))
    assert [(m["kind"], m["lambda"]) for m in models] == [("supervised", None), ("talos", 1.0)]
    assert models[1]["layer"]["weight"].shape[1] == 512 and len(history) == 1


def test_a_membership_task_trains_its_own_supervised_model_and_a_layer_on_every_contrastive_encoder(tmp_path):
    """With a membership task (here 4 classes against the task's 2) the supervised role gets a
    second model of its own, trained on those labels, and every contrastive and Talos encoder a
    second layer; without one, the membership model is the model itself. A restart reuses both
    supervised models."""
    from privssl.training.contrastive_targets import RoleJob, RoleSet, load_models, train_targets
    from privssl.training.simclr import Augmentation, SimCLRSpec

    images, task = random_images(24, 3)
    membership = torch.arange(24) % 4
    attribute = torch.randint(0, 3, (24,), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    public = {"encoder": "convnet", "width": 8, "state": build_encoder("convnet", 1, 8, 8).state_dict()}
    simclr = SimCLRSpec(encoder="convnet", width=8, augmentation=Augmentation(0.5, 0.3, 0.1, False))
    spec = TargetSpec(TrainingSpec(1, 12, 1e-3), TrainingSpec(100, 12, 1e-2), TrainingSpec(5, None, 0.01),
                      (0.0,), 8, 0.01)
    messages = []
    run = lambda with_task: train_targets(  # noqa: E731
        RoleSet(images, task, 2, attribute, 3, membership if with_task else None, 4 if with_task else None), public,
        simclr, spec, 1, RoleJob(7, CPU, tmp_path / "checkpoints", messages.append))
    models, _ = run(True)
    supervised, contrastive = models
    assert supervised["membership"]["layer"]["weight"].shape == (1, 8, 4)
    assert contrastive["membership"]["encoder"] is None and contrastive["membership"]["layer"]["weight"].shape == (1, 8, 4)
    bundle = {"encoder": "convnet", "width": 8, "in_channels": 1, "image_size": 8, "models": models}
    loaded = load_models(bundle, CPU)
    own = loaded[0].membership_model()
    assert own.encoder is not loaded[0].encoder and loaded[1].membership_model().encoder is loaded[1].encoder
    # the supervised membership model learned the 4 labels, the task's model the 2
    assert float((own.predict_labels(images) == membership).double().mean()) == 1.0
    assert float((loaded[0].predict_labels(images) == task).double().mean()) == 1.0
    messages.clear()
    run(True)
    assert sum("supervised model from" in m for m in messages) == 2
    same, _ = run(False)
    assert same[0]["membership"]["encoder"] is None
    assert torch.equal(same[0]["membership"]["layer"]["weight"], same[0]["layer"]["weight"])
    with pytest.raises(ValueError, match="one label per image"):
        RoleSet(images, task, 2, attribute, 3, membership[:5], 4)


def with_membership(models: list[TargetModel], seed: int, data: dict[str, Split]) -> list[TargetModel]:
    """The models with membership models of 3 classes: other encoders (the supervised) or other
    layers on the same encoder, varied over the data's images as varied_models' are."""
    images = torch.cat([split.images for split in data.values()])
    torch.manual_seed(seed)
    out = []
    for model in models:
        encoder = build_encoder("convnet", 1, 8, 8).eval() if model.kind == "supervised" else model.encoder
        with torch.no_grad():
            embeddings = encoder(images).double()
        weight = torch.randn(8, 3, dtype=torch.float64) / embeddings.std(0).clamp(min=1e-12)[:, None]
        layer = {"weight": weight[None], "bias": -(embeddings.mean(0) @ weight)[None]}
        out.append(TargetModel(model.kind, model.lam, model.repeat, model.encoder, model.layer,
                               TargetModel(model.kind, model.lam, model.repeat, encoder, layer)))
    return out


def test_membership_task_rows_query_the_membership_models_with_the_membership_labels():
    """The rows of inference `membership_task` equal the `membership` rows of a run in which each
    model is its membership model and the task labels are the membership labels; the `membership`
    rows stay the task models' (those of a run without a membership task), and so do the task
    accuracy and the attribute rows. Each membership row carries the queried model's fit."""
    data = evaluation_data()
    for i, split in enumerate(data.values()):
        split.membership = torch.randint(0, 3, (30,), generator=torch.Generator().manual_seed(100 + i))
    targets = with_membership(varied_models(0, data), 5, data)
    shadows = with_membership(varied_models(1, data), 6, data)
    run = lambda t, s, d, flag: evaluate("digits", pair_models(t, s), d, 4, SETTINGS, seed=0,  # noqa: E731
                                         log=lambda _: None, membership_task=flag)
    result = run(targets, shadows, data, True)
    swapped = {name: Split(split.images, split.membership, split.attribute, split.membership)
               for name, split in data.items()}
    reference = run([t.membership for t in targets], [s.membership for s in shadows], swapped, False)
    plain = run(targets, shadows, data, False)
    rows, expected_rows, plain_rows = (pd.DataFrame(r[0]) for r in (result, reference, plain))
    own = rows[rows.inference == "membership_task"].reset_index(drop=True)
    assert len(own) == 3 * len(MEMBERSHIP_ATTACKS)
    expected = expected_rows[expected_rows.inference == "membership"].reset_index(drop=True)
    for column in ("target", "attack", "accuracy", "auc", "queried_train_accuracy"):
        assert list(own[column]) == list(expected[column]), column
    calls = lambda r, inference: [c for row, _, c in r[1] if row["inference"] == inference]  # noqa: E731
    for mine, theirs in zip(calls(result, "membership_task"), calls(reference, "membership"), strict=True):
        assert np.array_equal(mine, theirs)
    others = rows[rows.inference != "membership_task"].reset_index(drop=True)
    for column in ("inference", "attack", "task_decisions", "accuracy", "task_accuracy", "queried_test_accuracy"):
        assert others[column].equals(plain_rows[column]), column
    for mine, theirs in zip(calls(result, "membership"), calls(plain, "membership"), strict=True):
        assert np.array_equal(mine, theirs)
    for (_, mine, majority), (_, theirs, other) in zip(result[2], plain[2], strict=True):
        assert np.array_equal(mine, theirs) and majority == other
    # the queried model's fit: the membership model's accuracy on the members' membership labels
    for target in targets:
        fit = float((target.membership.predict_labels(data["target_train"].images)
                     == data["target_train"].membership).double().mean())
        assert rows[(rows.target == target.kind) & (rows.inference == "membership_task")
                    ].queried_train_accuracy.unique().tolist() == pytest.approx([fit])


def test_a_shared_label_predictor_encodes_each_batch_once_per_encoder_and_answers_each_models_labels():
    data = evaluation_data()
    models = with_membership(varied_models(0, data), 5, data)
    images = torch.cat([split.images for split in data.values()])
    calls = []
    for encoder in {id(m.encoder): m.encoder for model in models for m in (model, model.membership)}.values():
        encoder.register_forward_hook(lambda module, *_: calls.append(module))
    for model in models:  # the supervised model's membership model has its own encoder
        calls.clear()
        labels = shared_label_predictor([model, model.membership_model()])(images)
        assert len(calls) == (2 if model.kind == "supervised" else 1), model.kind
        assert torch.equal(labels[0], model.predict_labels(images))
        assert torch.equal(labels[1], model.membership.predict_labels(images))
        assert not torch.equal(labels[0], labels[1])  # the layers differ: a swap would show


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1])
def test_the_repeats_of_a_role_share_no_seed(seed):
    """Each repeat is an independent training: its models' and its Talos adversaries' seeds are
    used by no other repeat of the role, nor by the repeats of the next stage seed, and repeat 0
    keeps the seeds of single-repeat runs."""
    from privssl.training.contrastive_targets import MAX_REPEATS, repeat_seeds

    used = [s for repeat in range(MAX_REPEATS) for s in repeat_seeds(seed, repeat)]
    assert len(set(used)) == len(used)
    assert not set(used) & {s for repeat in range(MAX_REPEATS) for s in repeat_seeds(seed + 1, repeat)}
    assert repeat_seeds(seed, 0) == (seed * 1000, seed * 1000 + 1)


@pytest.mark.parametrize("repeat", [-1, 500, 1.0, True])
def test_a_repeat_out_of_range_is_refused_naming_it(repeat):
    from privssl.training.contrastive_targets import repeat_seeds

    with pytest.raises(ValueError, match=re.escape(f"repeat {repeat!r} is not allowed")):
        repeat_seeds(0, repeat)


def test_each_repeat_meets_attacks_of_its_own_seed(evaluated):
    """The same models labelled repeats 0, 1 and 2: repeat 0's rows are those of the models
    attacked alone (the stage's seed); every two repeats' NN, boundary and attribute attacks
    differ (their decisions or AUCs), and so do the metric attacks' bootstrap intervals, while the
    metric attacks' decisions, which draw nothing, agree."""
    import dataclasses

    data, targets, shadows, alone, _ = evaluated
    relabel = lambda models, r: [dataclasses.replace(m, repeat=r) for m in models]  # noqa: E731
    pairs = pair_models(targets + relabel(targets, 1) + relabel(targets, 2),
                        shadows + relabel(shadows, 1) + relabel(shadows, 2))
    evaluated_rows, scored, guessed = evaluate("digits", pairs, data, 4, SETTINGS, seed=0, log=lambda _: None)
    # a row's per-record outcome: a membership row's calls, an attribute row's guesses
    calls = {id(row): pack_decisions(called) for row, _, called in scored}
    calls |= {id(row): pack_decisions(guesses == data["target_train"].attribute.numpy()) for row, guesses, _ in guessed}
    rows = pd.DataFrame([{**row, "decisions": calls[id(row)]} for row in evaluated_rows])
    keys = ["target", "inference", "attack"]
    by_repeat = [rows[rows.repeat == r].set_index(keys).sort_index() for r in range(3)]
    assert np.allclose(by_repeat[0].accuracy, alone.set_index(keys).sort_index().accuracy)
    attacks = by_repeat[0].index.get_level_values("attack")
    seeded = attacks.isin(["nn", "label_only_boundary", ATTRIBUTE_ATTACK])
    metric = attacks.isin(["correctness", "confidence", "entropy", "modified_entropy"])
    for a, b in ((0, 1), (0, 2), (1, 2)):
        first, second = by_repeat[a], by_repeat[b]
        for attack in ("nn", "label_only_boundary", ATTRIBUTE_ATTACK):
            chosen = attacks == attack
            differ = (first[chosen].decisions != second[chosen].decisions) | ~np.isclose(
                first[chosen].auc.fillna(-1), second[chosen].auc.fillna(-1))
            assert differ.any(), (a, b, attack)
        assert (first[metric].decisions == second[metric].decisions).all()
        assert not np.allclose(first[metric].auc_lo, second[metric].auc_lo), (a, b)  # the bootstrap's own seed
    assert not seeded[metric].any()


def test_attack_seeds_are_distinct_across_repeats_and_stage_seeds():
    from privssl.attacks.contrastive_privacy import attack_seed

    seeds = {attack_seed(seed, repeat) for seed in range(5) for repeat in range(100)}
    assert len(seeds) == 500
    assert attack_seed(7, 0) == 7  # repeat 0 keeps the stage's seed
