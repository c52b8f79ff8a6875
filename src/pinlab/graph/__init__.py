"""Affinity graphs: which threads share data, how it was measured, and how to map it on a machine."""

from __future__ import annotations

from pinlab.graph.model import AffinityGraph, graph_from_json, graph_from_matrix, load_graph

__all__ = ["AffinityGraph", "graph_from_json", "graph_from_matrix", "load_graph"]
