"""Adaptation data: documents -> chunks -> scales -> questions -> negatives -> splits -> triplets
and held-out evaluation sets. Run the chain with :func:`adaptlab.adapt.prep.prepare.prepare_adaptation_data`."""
