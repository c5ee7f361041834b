"""Readers that turn what users have (a graph spec, Flink's execution plan) into a `StreamGraph`."""

from hashing.readers.detect import LoadedGraph, load_graph, parse_graph

__all__ = ["LoadedGraph", "load_graph", "parse_graph"]
