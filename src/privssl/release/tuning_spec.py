"""What the tuning rule searches (config `tuning`), free of torch: the Snakefile and the config
check read it before any job runs.

Every release method's training is chosen on public data (privssl.release.tuning): a grid of
values of some fields of the method's config section, each point scored on the `reference`
split. `tuning.<section>` maps a field to the values it tries; the fields it leaves out keep
the section's value, so an absent section (or an absent `tuning`) scores the config's one point.

- `head`: A_S, the head the ALM family (alm, laplace, gaussian, gaussian_analytic) perturbs and
  the attacks' clean head; chosen once, for its noise: the least worst-case shortfall over every
  (method, ε) of the family, each point's head released with the noise of its own Δ sampled on the
  public pool (by noise-free accuracy where the run releases no method of the family).
- `certified`: the certified head of certified_gaussian and certified_pure; chosen once, by the
  least worst-case shortfall from each ε's own best.
- `dpsgd`: the DP-SGD head; chosen per ε (each ε is its own training) and for the noise-free limit.

`tuning.head` may also be a list of grids, whose points are pooled in the order written: the
stable recipes (a linear head, SGD, weight decay) and the over-fitting ones (an MLP trained by
Adam) differ in several fields at once, and their product would mostly hold points of neither.
"""

from __future__ import annotations

import itertools

TUNABLE = {  # config section -> the fields a grid may vary
    "head": ("architecture", "optimizer", "epochs", "lr", "momentum", "weight_decay", "hidden", "batch_size"),
    "certified": ("l2", "clip_norm"),
    "dpsgd": ("lr", "epochs", "batch_size", "clip_norm", "momentum"),
}
SECTIONS = tuple(TUNABLE)


def tuned_sections(mechanisms) -> list[str]:
    """The sections a run tunes: the head always (it is the clean head every attack compares
    with), the certified head and DP-SGD where a release method uses them."""
    sections = ["head"]
    if any(m in ("certified_gaussian", "certified_pure") for m in mechanisms):
        sections.append("certified")
    if "dpsgd" in mechanisms:
        sections.append("dpsgd")
    return sections


def section_grids(config: dict, section: str) -> list[dict]:
    """The section's grids (a list for `head`, else one), each checked for its fields."""
    if section not in TUNABLE:
        raise ValueError(f"no tuning of section {section!r}; allowed: {', '.join(SECTIONS)}")
    grids = config.get("tuning", {}).get(section, {})
    grids = grids if isinstance(grids, list) and section == "head" else [grids]
    for grid in grids:
        if not isinstance(grid, dict):
            raise ValueError(f"tuning.{section} must be a mapping of fields to lists of values"
                             f"{' (or, for head, a list of them)' if section == 'head' else ''}; got {grid!r}")
        unknown = sorted(set(grid) - set(TUNABLE[section]))
        if unknown:
            raise ValueError(f"tuning.{section} may vary {', '.join(TUNABLE[section])}; not {', '.join(unknown)}")
    return grids


def grid_points(config: dict, section: str) -> list[dict]:
    """Every point of a section's grid as the whole section (config values, the grid's fields
    replaced), in the order of the product of the grid's lists, the fields taken in alphabetical
    order (the last varies fastest) and each list as written; a list of grids: the points of each,
    one grid after the other."""
    points = []
    for grid in section_grids(config, section):
        fields = sorted(grid)
        points += [config[section] | dict(zip(fields, values))
                   for values in itertools.product(*(grid[f] for f in fields))]
    return points


def checked_points(config: dict, section: str, spec_class) -> list[dict]:
    """Every point of the section's grid, each read by `spec_class.from_config` first, so that a
    bad point is refused (TypeError, ValueError) before any training."""
    points = grid_points(config, section)
    for point in points:
        spec_class.from_config(point)
    return points


def varied_fields(config: dict, section: str) -> list[str]:
    """The fields the section's grids vary (the columns of its tuning table), alphabetically."""
    return sorted({field for grid in section_grids(config, section) for field in grid})
