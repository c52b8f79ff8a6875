"""Graphs with a planted structure for the graph tests: known heaviest pairs over random noise."""
from __future__ import annotations

import json
import random
from pathlib import Path

from pinlab.graph.model import AffinityGraph


def planted_graph(threads: int, pairs: list[tuple[int, int, float]], *, noise: float = 10.0, seed: int = 1) -> AffinityGraph:
    """Noise in 0..noise on every pair (whole numbers, some zero), the planted pairs' weights on top."""
    rng = random.Random(seed)
    weights = [[0.0] * threads for _ in range(threads)]
    for i in range(threads):
        for j in range(i + 1, threads):
            weights[i][j] = weights[j][i] = float(rng.randint(0, int(noise)))
    for i, j, w in pairs:
        weights[i][j] = weights[j][i] = float(w)
    return AffinityGraph(weights=weights)


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path
