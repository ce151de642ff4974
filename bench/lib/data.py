"""The input bytes: one random file per size (the trees are trees.py's)."""
import os
import random

from .common import MiB


def make_data(path, size, seed=7):
    """Random bytes (no period, so a reordering cannot hide); reused when already right."""
    if os.path.exists(path) and os.path.getsize(path) == size:
        with open(path + ".seed") as f:
            if f.read() == f"{seed}:{size}":
                return
    rng = random.Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 * MiB)
            f.write(rng.randbytes(n))
            left -= n
    with open(path + ".seed", "w") as f:
        f.write(f"{seed}:{size}")
