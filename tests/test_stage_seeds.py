"""A stage's seed depends on the config seed and the stage's name only."""

import hashlib
import re
from pathlib import Path

import pytest

from privssl.stage_seeds import SEED_BITS, repeat_seed, stage_seed

ROOT = Path(__file__).resolve().parents[1]


def stage_names_in_rules() -> set[str]:
    """The literal names the rules pass to stage_seed (the f-string ones with their roles)."""
    text = "\n".join(p.read_text() for p in (ROOT / "rules").glob("*.smk"))
    names = set(re.findall(r'stage_seed\("([a-z0-9_]+)"\)', text))
    assert 'stage_seed(f"contrastive_{w.role}")' in text
    names |= {"contrastive_target", "contrastive_shadow"}
    # Semi-Leak's stages, once per repeat (rules/common.smk semileak_seed): 5 repeats of each
    assert 'semileak_seed(f"semileak_{w.role}", w.repeat)' in text
    assert 'stage_seeds.repeat_seed(config["seed"], stage, int(repeat))' in text  # the tested scheme
    semileak = set(re.findall(r'semileak_seed\("([a-z0-9_]+)", w.repeat\)', text)) | {"semileak_target",
                                                                                     "semileak_shadow"}
    assert "semileak_attack" in semileak
    return names | {name + (f"_repeat{r}" if r else "") for name in semileak for r in range(5)}


def test_the_seed_is_sha256_of_the_config_seed_and_the_name():
    # recomputed independently: the first 8 bytes of the digest, big-endian, top 31 bits
    digest = hashlib.sha256(b"privssl/7/pretrain").hexdigest()
    assert stage_seed(7, "pretrain") == int(digest[:16], 16) // 2 ** (64 - SEED_BITS)


def test_every_stage_of_the_rules_has_its_own_seed_within_torchs_range():
    names = stage_names_in_rules()
    assert {"pretrain", "splits", "protect_dpsgd", "semileak_target", "audit_canary"} <= names
    for config_seed in (0, 1, 2 ** 31 - 1):
        seeds = {name: stage_seed(config_seed, name) for name in names}
        assert len(set(seeds.values())) == len(names), seeds
        # the scripts' sub-seeds (seed * 1_000_003 + epoch) stay inside torch.manual_seed's int64
        assert all(0 <= s < 2 ** SEED_BITS for s in seeds.values())


@pytest.mark.parametrize("config_seed, stage", [(-1, "pretrain"), (1.0, "pretrain"), (True, "pretrain"),
                                                (0, ""), (0, "Pretrain"), (0, "protect alm"), (0, None)])
def test_a_bad_seed_or_name_is_refused_naming_it(config_seed, stage):
    with pytest.raises(ValueError, match=re.escape(repr(config_seed if stage == "pretrain" else stage))):
        stage_seed(config_seed, stage)


def test_every_repeat_of_a_stage_has_its_own_seed_and_repeat_0_the_stages():
    """Semi-Leak's repeats (rules/common.smk semileak_seed) are independent trainings: a seed shared
    between two repeats would make them one training counted twice."""
    for stage in ("semileak_target", "semileak_shadow", "semileak_attack"):
        seeds = [repeat_seed(3, stage, r) for r in range(100)]
        assert seeds[0] == stage_seed(3, stage) and len(set(seeds)) == 100
    assert repeat_seed(3, "semileak_target", 1) != repeat_seed(3, "semileak_shadow", 1)
    with pytest.raises(ValueError, match="repeat -1"):
        repeat_seed(3, "semileak_target", -1)
