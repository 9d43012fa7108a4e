"""Third-party libraries kept quiet: transformers' and sentence-transformers' load messages
("Some weights of ... were not initialized") and their progress bars are off while a model loads
and trains (:func:`quiet_third_party`); errors still show. :func:`load_sentence_model` loads a
local model that way.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["load_sentence_model", "quiet_third_party"]


@contextlib.contextmanager
def quiet_third_party() -> Iterator[None]:
    """transformers at verbosity ``error`` without progress bars, and sentence-transformers'
    logger at ERROR, for the block (restored afterwards): a healthy load or training run prints
    nothing of theirs."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    st_logger = logging.getLogger("sentence_transformers")
    st_level = st_logger.level
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    st_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
        st_logger.setLevel(st_level)


def load_sentence_model(path: str | os.PathLike[str], device: str) -> Any:
    """Load a local sentence-transformers directory (never from a hub), without third-party load
    messages (:func:`quiet_third_party`)."""
    from sentence_transformers import SentenceTransformer

    with quiet_third_party():
        return SentenceTransformer(str(path), device=device, local_files_only=True)
