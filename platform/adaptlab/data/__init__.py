"""Datasets: the in-memory model, loaders for common formats, and a synthetic generator."""

from adaptlab.data.dataset import Dataset, Document, Qrels, Run

__all__ = ["Dataset", "Document", "Qrels", "Run"]
