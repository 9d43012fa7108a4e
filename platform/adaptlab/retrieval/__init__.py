"""Retrieval: exact top-k search and the per-query records every metric is computed from."""

from adaptlab.retrieval.build import build_records
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.search import exact_search

__all__ = ["PerQueryRecords", "build_records", "exact_search"]
