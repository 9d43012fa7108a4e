"""Calibration text for static int8 quantization: seeded, generated English prose.

Static quantization (Jacob et al., "Quantization and Training of Neural Networks for Efficient
Integer-Arithmetic-Only Inference", CVPR 2018, sec. 2.1 and 3) fixes each activation's int8 scale
from the value ranges the float model produces on calibration inputs. Those ranges depend on
what the text looks like (sentences, function words, punctuation, numbers) far more than on its
topic: calibrated on Wikipedia paragraphs or on scientific abstracts, all-MiniLM-L6-v2's int8
vectors of 192 SciFact abstracts keep the same mean cosine to fp32 (0.9971 and 0.9970), while
random vocabulary words give 0.986 and this module's prose 0.9954. So adaptlab calibrates on
prose it writes itself from a fixed seed: the same text on every node and for every corpus, so an
int8 model is one model (its export is cached per revision and calibration text) and its vectors
do not depend on which corpus was embedded first. The project carries no dataset text.

>>> texts = calibration_texts(3)
>>> len(texts), texts == calibration_texts(3), all(t.endswith(".") for t in texts)
(3, True, True)
"""

from __future__ import annotations

import random

__all__ = ["CALIBRATION_SEED", "calibration_texts"]

CALIBRATION_SEED = 20261129
"""The seed of the generated prose (part of what an int8 export is)."""

_NOUNS = (
    "study patient cell protein method model result effect group sample rate level trial analysis "
    "treatment response system process test value data measure gene risk factor dose outcome "
    "region population change structure function role pathway signal member report area city "
    "river century government company school team season album song player war period language "
    "family species surface water energy temperature pressure market price network device user "
    "question answer document query corpus record year month week day line image material "
    "phosphorylation inflammation metabolism transcription apoptosis angiogenesis hypertension "
    "vaccination chromatography microscopy receptor antibody cytokine mitochondria neuron "
    "legislation parliament constitution municipality archipelago cathedral dynasty treaty "
    "manuscript orchestra tournament championship infrastructure algorithm semiconductor "
    "spectroscopy coefficient heterogeneity regression ecosystem sediment glacier volcano"
).split()
_ADJECTIVES = (
    "significant higher lower large small early late new common important different similar "
    "primary clinical human national local public recent major specific total normal average "
    "chronic acute central first second final natural political economic social technical "
    "cardiovascular intracellular longitudinal randomized multivariate statistical metabolic "
    "bacterial genetic molecular environmental agricultural medieval parliamentary orbital"
).split()
_VERBS = (
    "increased reduced showed affected measured described compared improved produced included "
    "required suggested controlled followed reported found supported changed caused limited "
    "identified observed received developed replaced established expanded maintained"
).split()
_PREPOSITIONS = "in of for with after during between among within across under from".split()
_CONNECTIVES = ("However,", "In addition,", "As a result,", "By contrast,", "Overall,", "In this case,")
_UNITS = ("%", " mg", " years", " km", " patients", " cases", " mm", " days")


def _noun_phrase(rng: random.Random) -> str:
    det = rng.choice(("the", "the", "a", "this", "each", "their"))
    adj = f"{rng.choice(_ADJECTIVES)} " if rng.random() < 0.5 else ""
    noun = rng.choice(_NOUNS) + ("s" if rng.random() < 0.3 else "")
    return f"{det} {adj}{noun}"


def _number(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return f"{rng.randint(2, 99)}.{rng.randint(0, 9)}{rng.choice(_UNITS)}"
    return str(rng.choice((rng.randint(2, 500), rng.randint(1850, 2024))))


def _sentence(rng: random.Random) -> str:
    """One sentence: subject, verb, object, optional prepositional phrase, number or aside."""
    words = [_noun_phrase(rng), rng.choice(_VERBS), _noun_phrase(rng)]
    if rng.random() < 0.7:
        words += [rng.choice(_PREPOSITIONS), _noun_phrase(rng)]
    if rng.random() < 0.4:
        words.append(f"({_number(rng)})" if rng.random() < 0.5 else f"by {_number(rng)}")
    if rng.random() < 0.2:
        words.insert(0, rng.choice(_CONNECTIVES))
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def calibration_texts(n: int = 256, *, seed: int = CALIBRATION_SEED) -> list[str]:
    """``n`` paragraphs of 6-24 generated sentences (about 60-300 words), the same for the same
    ``n`` and ``seed``."""
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(6, 24))) for _ in range(n)]
