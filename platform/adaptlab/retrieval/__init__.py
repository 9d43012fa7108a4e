"""Retrieval: top-k search and the per-query records every metric is computed from (dense exact
search; ColBERT exact MaxSim, or a PLAID index beyond the exact search's size limit)."""

from adaptlab.retrieval.build import build_records, records_from_run
from adaptlab.retrieval.late import build_late_records
from adaptlab.retrieval.plaid import build_plaid_records
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.search import exact_search
from adaptlab.retrieval.settings import SearchSettings

__all__ = [
    "PerQueryRecords",
    "SearchSettings",
    "build_late_records",
    "build_plaid_records",
    "build_records",
    "exact_search",
    "records_from_run",
]
