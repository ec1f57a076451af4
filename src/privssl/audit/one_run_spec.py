"""The one-run audit's names and guess counts, torch-free: the config check and the config's
grids (run before any job) and the audit itself use one definition."""


def one_run_audit_name(kind: str) -> str:
    """The `audit` column of a one-run audit with canaries of `kind`."""
    return f"one_run_{kind}"


def guesses_per_side(guess_fraction: float, canaries: int) -> int:
    """The guesses "in" (and as many "out") on `guess_fraction` of the canary slots."""
    return round(guess_fraction * canaries / 2)


def check_guesses(guess_fraction: float, canaries: int) -> str | None:
    """What is wrong with a guess fraction (None: nothing): it must give at least one guess on
    each side, and no more guesses than canaries."""
    per_side = guesses_per_side(guess_fraction, canaries)
    if 1 <= per_side <= canaries / 2:
        return None
    return (f"{guess_fraction} of {canaries} canaries gives {per_side} guesses on each side (allowed: > 1/canaries = "
            f"{1 / canaries:.4g}, for at least one guess \"in\" and one \"out\""
            + (", and < 1, for at most as many guesses as canaries" if per_side else "") + ")")
