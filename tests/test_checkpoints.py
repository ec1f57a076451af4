"""Checkpoints never outlive their settings or their code (privssl.training.checkpoints).

Each training setting of the SimCLR section of the default config is changed in turn; a
checkpoint written before the change must not be resumed, and the log must name the setting. The
list of settings comes from config.yaml, not from the fingerprint under test, so a setting the
fingerprint forgets fails here. The Semi-Leak trainings' fingerprint (built in
scripts/semileak_train.py) is checked on DP-SGD's clip norm, the case found resuming unchanged."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

from privssl.data.images import load_pool
from privssl.training import checkpoints
from privssl.training.augment import AugmentSpec
from privssl.training.semi_supervised import TrainSpec, checkpoint_fingerprint
from privssl.training.semi_supervised_private import PrivateSpec
from privssl.training.simclr import SimCLRSpec, pretrain

REPO = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
CONFIG = yaml.safe_load((REPO / "config.yaml").read_text())
SIMCLR, SEMILEAK = CONFIG["simclr"], CONFIG["semileak"]
ALTERNATIVE = {"encoder": {"convnet": "resnet18", "resnet18": "convnet"},
               "negatives": {"cross_view": "all", "all": "cross_view"},
               "architecture": {"cnn": "wrn", "wrn": "cnn"}}


def leaves(section: dict, prefix: str = "") -> list[str]:
    return [key for name, value in section.items()
            for key in (leaves(value, f"{prefix}{name}.") if isinstance(value, dict) else [f"{prefix}{name}"])]


def changed(section: dict, key: str) -> dict:
    """A copy of the section with the leaf `key` set to another allowed value."""
    copy = yaml.safe_load(yaml.safe_dump(section))
    *path, name = key.split(".")
    node = copy
    for part in path:
        node = node[part]
    value = node[name]
    if name in ALTERNATIVE:
        node[name] = ALTERNATIVE[name][value]
    elif isinstance(value, bool):
        node[name] = not value
    elif isinstance(value, int):
        node[name] = value + 1
    else:
        node[name] = value / 2
    return copy


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return load_pool("digits", tmp_path_factory.mktemp("data")).images[:24]


def small(section: dict) -> dict:
    return {**section, "width": section["width"] // 16, "epochs": 1, "batch_size": section["batch_size"] // 16}


@pytest.fixture(scope="module")
def written(images, tmp_path_factory) -> Path:
    checkpoint = tmp_path_factory.mktemp("simclr") / "simclr.pt"
    pretrain(SimCLRSpec.from_config(small(SIMCLR)), images, 0, CPU, checkpoint, lambda _: None, code="a")
    return checkpoint


@pytest.mark.parametrize("key", [key for key in leaves(SIMCLR) if key != "epochs"])
def test_a_simclr_checkpoint_is_not_resumed_under_another_setting(images, written, key):
    messages = []
    spec = SimCLRSpec.from_config(changed(small(SIMCLR), key))
    pretrain(spec.__class__(**{**spec.__dict__, "epochs": 0}), images, 0, CPU, written, messages.append, code="a")
    assert not any("resumed" in m for m in messages), key
    field = f"simclr.{key.split('.')[0]}"
    assert any(m.startswith(f"ignoring {written}") and field in m for m in messages), (key, messages)


@pytest.mark.parametrize("name, kwargs", [("seed", {"seed": 1}), ("code", {"code": "b"}),
                                          ("images", {"images": "flipped"})])
def test_a_simclr_checkpoint_is_not_resumed_under_another_seed_code_or_data(images, written, name, kwargs):
    messages = []
    data = images.flip(0) if kwargs.pop("images", None) else images
    spec = SimCLRSpec.from_config(small(SIMCLR))
    args = {"seed": 0, "code": "a"} | kwargs
    pretrain(spec.__class__(**{**spec.__dict__, "epochs": 0}), data, args["seed"], CPU, written, messages.append,
             code=args["code"])  # no epoch: the checkpoint is read, not overwritten
    assert any(m.startswith(f"ignoring {written}") and name in m for m in messages), messages


def test_the_same_settings_resume(images, written):
    messages = []
    spec = SimCLRSpec.from_config(small(SIMCLR))
    pretrain(spec, images, 0, CPU, written, messages.append, code="a")
    assert messages and messages[0] == f"resumed from {written} after epoch 1"


def test_a_spec_is_spread_into_named_fields_and_a_mismatch_names_them():
    before = checkpoints.fingerprint(private=PrivateSpec(1.0, 1.0), seed=0)
    after = checkpoints.fingerprint(private=PrivateSpec(1.0, 50.0), seed=0)
    clip = [key for key in before if before[key] != after[key]]
    assert len(clip) == 1 and clip[0].startswith("private.") and before[clip[0]] == repr(1.0)
    assert checkpoints.differing(before, after) == clip
    assert checkpoints.differing(before, {**before, "new": "1"}) == ["new"]
    assert checkpoints.differing(repr((1, 2)), before) == [checkpoints.OLDER_FORMAT]  # the old tuple's repr
    messages = []
    assert not checkpoints.resumable(before, after, Path("x.pt"), messages.append)
    assert messages == [f"ignoring x.pt: it was written under another {clip[0]}; starting afresh"]
    assert checkpoints.resumable(before, dict(before), Path("x.pt"), messages.append) and len(messages) == 1
    assert checkpoints.fingerprint(network={"width": 2, "architecture": "wrn"}) == {
        "network.architecture": "'wrn'", "network.width": "2"}
    assert checkpoints.fingerprint(value=math.inf) == {"value": "inf"}


def test_a_finished_job_discards_its_checkpoints(tmp_path):
    folder = tmp_path / "checkpoint" / "target"
    folder.mkdir(parents=True)
    (folder / "run.pt").write_bytes(b"state")
    checkpoints.discard(tmp_path / "checkpoint")
    assert not (tmp_path / "checkpoint").exists()
    single = tmp_path / "simclr.pt"
    single.write_bytes(b"state")
    checkpoints.discard(single)
    checkpoints.discard(single)  # nothing left: no error
    assert not single.exists()


def test_the_code_field_follows_the_script_and_its_library_code(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("from privssl.training.heads import train_head\ntrain_head\n")
    code = checkpoints.script_code(script)
    assert code.startswith("train.py=") and "privssl.training.heads=" in code
    script.write_text("from privssl.training.heads import train_head\ntrain_head  # a comment\n")
    assert checkpoints.script_code(script) == code
    script.write_text("from privssl.training.heads import train_head\ntrain_head(1)\n")
    assert checkpoints.script_code(script) != code


def semileak_fingerprint(section: dict, clip_norm: float = 1.0) -> dict[str, str]:
    """As scripts/semileak_train.py builds it from the `semileak` section it is given."""
    return checkpoint_fingerprint("fixmatch_dpsgd", TrainSpec.from_config(section["train"]),
                                  AugmentSpec.from_config(section["augmentation"]), section["network"], 0, CPU,
                                  "data", "code", private=PrivateSpec(1.0, clip_norm))


PREFIX = {"train": "train.", "augmentation": "augment.", "network": "network."}


@pytest.mark.parametrize("key", [f"{part}.{key}" for part in PREFIX for key in leaves(SEMILEAK[part])])
def test_a_semileak_checkpoint_is_not_resumed_under_another_setting(key):
    part, rest = key.split(".", 1)
    edited = {**SEMILEAK, part: changed(SEMILEAK[part], rest)}
    fields = checkpoints.differing(semileak_fingerprint(SEMILEAK), semileak_fingerprint(edited))
    assert fields and all(field.startswith(PREFIX[part]) for field in fields), (key, fields)


def test_a_semileak_checkpoint_is_not_resumed_under_another_clip_norm():
    # issue 29's case: clip norm 1.0 -> 50 resumed the final step of the old run
    fields = checkpoints.differing(semileak_fingerprint(SEMILEAK), semileak_fingerprint(SEMILEAK, clip_norm=50.0))
    assert fields == ["private.clip_norm"]
