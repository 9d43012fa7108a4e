"""Datasets: the in-memory model, loaders and writers for common formats, raw document corpora,
and a synthetic generator."""

from adaptlab.data.beir import load_beir, read_beir_qrels, write_beir
from adaptlab.data.dataset import Dataset, Document, Qrels, Run
from adaptlab.data.documents import CleanOptions, clean_text, corpus_from_dataset, load_documents
from adaptlab.data.groups import read_group_file
from adaptlab.data.loaders import DATASET_FORMATS, load_dataset, parse_dataset_spec
from adaptlab.data.pairs import PairSettings, load_pairs
from adaptlab.data.pubmedqa import load_pubmedqa
from adaptlab.data.sciq import load_sciq
from adaptlab.data.squad import load_squad
from adaptlab.data.synthetic import (
    Fact,
    RawDocument,
    synthetic_dataset,
    synthetic_documents,
    synthetic_questions,
)
from adaptlab.data.text import normalise_whitespace, sentence_texts, split_sentences
from adaptlab.data.trec import (
    rank_run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)

__all__ = [
    "CleanOptions",
    "DATASET_FORMATS",
    "Dataset",
    "Document",
    "Fact",
    "PairSettings",
    "Qrels",
    "RawDocument",
    "Run",
    "clean_text",
    "corpus_from_dataset",
    "load_beir",
    "load_dataset",
    "read_group_file",
    "load_documents",
    "load_pairs",
    "load_pubmedqa",
    "load_sciq",
    "load_squad",
    "normalise_whitespace",
    "parse_dataset_spec",
    "rank_run",
    "read_beir_qrels",
    "read_trec_qrels",
    "read_trec_run",
    "sentence_texts",
    "split_sentences",
    "synthetic_dataset",
    "synthetic_documents",
    "synthetic_questions",
    "write_beir",
    "write_trec_qrels",
    "write_trec_run",
]
