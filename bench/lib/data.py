"""The input bytes: one random file per size, one tree of small files."""
import os
import random
import shutil

from .common import KiB, MiB


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


def make_tree(root, files, size=4 * KiB):
    if os.path.isdir(root) and sum(len(fs) for _, _, fs in os.walk(root)) == files:
        return
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(11)
    for i in range(files):
        d = os.path.join(root, f"d{i // 100:03}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05}"), "wb") as f:
            f.write(rng.randbytes(size))
