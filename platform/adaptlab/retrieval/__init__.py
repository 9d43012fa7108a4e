"""Retrieval: exact top-k search and the per-query records every metric is computed from."""
