"""For Python functions that run on Sluice's workers (`map: {fn: "py:MODULE.FUNCTION"}`).

    import numpy as np
    import sluice.worker

    def jitter(image):
        rng = np.random.default_rng(sluice.worker.seed())
        ...

`seed()` is the seed of the element being processed (the step's `seed`
argument mixed with the element's bytes, as the built-in random functions
draw theirs), so seeded augmentation gives the same output on every run
and after a restore. A function with a `seed` parameter gets it as that
argument too.
"""

from __future__ import annotations

_seed: int | None = None


def seed() -> int | None:
    """The current element's seed, or None outside a worker's call."""
    return _seed
