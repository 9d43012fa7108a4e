"""A deterministic synthetic technical domain: documents, facts and paraphrased questions.

Used by the tests and the quickstart, where no real corpus may be shipped. The domain is an
invented plant-maintenance manual: every document describes one component (an invented
name such as "Tervane regulator"), one fact per sentence -- its material, temperature and
pressure limits, bolt torque, service intervals, lubricant, typical fault, supplier, ... with
invented materials, suppliers, procedure codes and numeric specifications.

What makes it a useful retrieval benchmark (the sentence-level setting of
000_2bab498a74ac645b: each question is answerable by exactly one sentence):

- every component has one fact per attribute, so a (component, attribute) question has one
  gold sentence;
- many sentences are alike: the same attribute appears in most documents with the same
  sentence templates, and after its first sentence a document mostly refers to its component
  as "the regulator", "the unit" or "it", so the name alone does not find the sentence;
- components share name roots ("Tervane regulator", "Tervane injector") and documents
  mention one another ("... passes its output to the Oskrel damper");
- questions paraphrase the gold sentence instead of copying it, and about a third of them use
  the domain's own jargon for an attribute ("soak limit" for the maximum temperature,
  "sweep interval" for the inspection interval, ...). The jargon is consistent across the
  domain, so fine-tuning on questions about some documents can learn it and help on
  questions about other documents, which a general-purpose model cannot know.

all-MiniLM-L6-v2 reaches a moderate accuracy@5 on it (see docs/datasets.md, "The synthetic
domain", for the measured values). Everything is a pure function of the arguments: the same
``seed`` gives the same documents, facts and questions on every machine (numpy ``Generator``,
PCG64).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from adaptlab.data.dataset import Dataset, Document
from adaptlab.errors import ConfigError

__all__ = [
    "ATTRIBUTES",
    "SYNTHETIC_LEVELS",
    "Fact",
    "RawDocument",
    "synthetic_dataset",
    "synthetic_documents",
    "synthetic_questions",
]

SYNTHETIC_LEVELS = ("sentence", "document")


@dataclass(frozen=True)
class Fact:
    """One ground-truth fact: the sentence stating it and the questions it answers.

    ``id`` is also the corpus id of the sentence at sentence level (``{document_id}-s{k}``).
    ``questions`` are paraphrases; ``jargon[i]`` tells whether ``questions[i]`` uses the
    domain's jargon for the attribute.
    """

    id: str
    document_id: str
    sentence_index: int
    span: tuple[int, int]
    sentence: str
    subject: str
    attribute: str
    value: str
    questions: tuple[str, ...]
    jargon: tuple[bool, ...]


@dataclass(frozen=True)
class RawDocument:
    """A document before it is cut into a corpus: id, title, text (and known facts, if any)."""

    id: str
    title: str
    text: str
    facts: tuple[Fact, ...] = field(default=())

    def full_text(self, sep: str = " ") -> str:
        """Title and text joined as BEIR and MTEB embed them."""
        return f"{self.title}{sep}{self.text}" if self.title else self.text


# ---------------------------------------------------------------------------------------
# vocabulary of the invented domain
# ---------------------------------------------------------------------------------------
_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "tr",
    "st",
    "sk",
    "pl",
    "th",
    "qu",
]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"]
_CODAS = ["", "n", "r", "l", "x", "s", "th", "nd", "rk", "lv", "m"]
_ENDINGS = ["ane", "ex", "ion", "ar", "ith", "ora", "el", "ix", "und", "ost", "ene", "ic"]

_TYPES = [
    "regulator",
    "injector",
    "manifold",
    "coupling",
    "actuator",
    "impeller",
    "valve",
    "bearing",
    "condenser",
    "spindle",
    "rotor",
    "damper",
    "compressor",
    "diffuser",
    "nozzle",
    "gearbox",
    "turbine",
    "separator",
    "heat exchanger",
    "pump",
]
_SYSTEMS = [
    "primary cooling loop",
    "feedwater train",
    "lubrication circuit",
    "exhaust line",
    "condensate return",
    "fuel conditioning skid",
    "hydraulic pack",
    "steam header",
    "brine circuit",
    "vacuum stage",
    "intake train",
    "flare system",
]
_PLANTS = [
    "Marrowick station",
    "Oldfen works",
    "Carrow yard",
    "Hesket plant",
    "Brindle depot",
    "Quarle terminal",
    "Vantry mill",
    "Sorrel basin",
]
_MATERIAL_A = [
    "borvium",
    "stellan",
    "quenite",
    "carrex",
    "mordite",
    "talvane",
    "ferrosin",
    "halcite",
    "pyrone",
    "velloy",
    "zircane",
    "duralite",
]
_MATERIAL_B = ["alloy", "bronze", "ceramic", "steel", "composite", "polymer", "cast iron"]
_LUBE_A = ["Korrin", "Altex", "Verdane", "Molvane", "Sethrin", "Palgrave", "Oxley", "Tarran"]
_LUBE_B = ["grease", "oil", "paste", "wax"]
_FAILURES = [
    "seal creep",
    "pitting corrosion",
    "thermal cracking",
    "shaft wobble",
    "cavitation scarring",
    "fretting wear",
    "coil burnout",
    "scale build-up",
    "bearing spalling",
    "gasket blowout",
    "stress fatigue",
    "valve chatter",
    "impeller erosion",
    "winding short",
    "port clogging",
    "flange warping",
]
_SUPPLIER_A = [
    "Halden",
    "Voss",
    "Marlow",
    "Crane",
    "Petrov",
    "Ashby",
    "Kessler",
    "Moreau",
    "Lindqvist",
    "Okafor",
    "Brandt",
    "Sato",
]
_SUPPLIER_B = ["Engineering", "Fluid Systems", "Industrial", "Mechanics", "Works", "Dynamics"]
_TOWNS = ["Marrowick", "Tillbury", "Castlegate", "Norwood", "Edgemoor", "Penrith", "Ashdown"]
_SOLVENTS = [
    "citrane solvent",
    "dilute orvic acid",
    "warm brine wash",
    "kestrel degreaser",
    "alkaline rinse",
    "salvene spirit",
    "steam lance",
    "vellum cleaner",
]
_LAMPS = [
    "a red lamp",
    "an amber lamp",
    "a blue lamp",
    "a flashing white lamp",
    "a green beacon",
    "a violet lamp",
    "an orange strobe",
]
_SHORT_REFS = ["the {type}", "the unit", "this {type}", "the component"]


@dataclass(frozen=True)
class _Attribute:
    name: str
    sentences: tuple[str, ...]  # {S} subject phrase, {P} possessive; first letter capitalised
    plain: tuple[str, ...]  # question paraphrases in plain words; {N} = full name
    jargon: tuple[str, ...]  # questions in the domain's jargon


_ATTRS: tuple[_Attribute, ...] = (
    _Attribute(
        "material",
        ("{P} housing is machined from {v}.", "{S} is cast in {v}.", "{P} body is made of {v}."),
        ("What material is the {N} made of?", "Which alloy forms the casing of the {N}?"),
        ("What is the body stock of the {N}?",),
    ),
    _Attribute(
        "max_temperature",
        (
            "{S} is rated for continuous service up to {v}.",
            "{S} must never run hotter than {v}.",
            "Above {v} {S} shuts itself down.",
        ),
        ("What is the highest temperature the {N} can tolerate?", "How hot can the {N} get before it has to stop?"),
        ("What is the soak limit of the {N}?",),
    ),
    _Attribute(
        "min_temperature",
        (
            "Below {v} {S} has to be preheated before start-up.",
            "{S} needs warming whenever the surroundings fall under {v}.",
        ),
        (
            "At what temperature must the {N} be warmed before starting?",
            "How cold can it get before the {N} needs heating?",
        ),
        ("What is the cold-start floor of the {N}?",),
    ),
    _Attribute(
        "pressure",
        ("{S} works at a line pressure of {v}.", "Working pressure inside {S} is held at {v}."),
        ("What pressure does the {N} operate at?", "How much pressure is kept in the {N}?"),
        ("What line charge does the {N} carry?",),
    ),
    _Attribute(
        "torque",
        ("The mounting bolts of {S} are tightened to {v}.", "{P} fasteners take {v} of torque."),
        ("How tight should the bolts on the {N} be?", "What torque goes on the {N} fasteners?"),
        ("What is the seat torque of the {N}?",),
    ),
    _Attribute(
        "inspection_interval",
        ("{S} is inspected every {v}.", "A technician examines {S} once every {v}."),
        ("How often is the {N} checked?", "At what interval does someone look over the {N}?"),
        ("What is the sweep interval of the {N}?",),
    ),
    _Attribute(
        "replacement_interval",
        ("After {v} in service {S} is replaced outright.", "{S} reaches the end of its life after {v}."),
        ("When does the {N} have to be replaced?", "How long does the {N} last before renewal?"),
        ("What is the swap-out life of the {N}?",),
    ),
    _Attribute(
        "lubricant",
        ("{P} bearings are greased with {v}.", "{S} is lubricated with {v}."),
        ("Which lubricant does the {N} need?", "What keeps the {N} running smoothly?"),
        ("What dressing does the {N} take?",),
    ),
    _Attribute(
        "failure_mode",
        ("The most common fault of {S} is {v}.", "{S} most often fails through {v}."),
        ("What usually goes wrong with the {N}?", "What is the typical defect of the {N}?"),
        ("What is the chronic knock of the {N}?",),
    ),
    _Attribute(
        "calibration",
        ("{S} is calibrated according to procedure {v}.", "Calibration of {S} follows procedure {v}."),
        ("Which procedure is used to calibrate the {N}?", "How is the {N} adjusted?"),
        ("What trim routine applies to the {N}?",),
    ),
    _Attribute(
        "feeds",
        ("{S} passes its output to the {v}.", "Downstream of {S} sits the {v}."),
        ("Which component receives the output of the {N}?", "What comes after the {N}?"),
        ("What is the downstream partner of the {N}?",),
    ),
    _Attribute(
        "weight",
        ("{S} weighs {v} when fully assembled.", "Fully assembled, {S} has a mass of {v}."),
        ("How heavy is the {N}?", "What does the {N} weigh?"),
        ("What is the dry mass rating of the {N}?",),
    ),
    _Attribute(
        "supplier",
        ("{S} is supplied by {v}.", "{S} is manufactured by {v}."),
        ("Who makes the {N}?", "Which company builds the {N}?"),
        ("Which source works delivers the {N}?",),
    ),
    _Attribute(
        "cleaning",
        ("Deposits on {S} are removed with {v}.", "{S} is cleaned with {v}."),
        ("What is used to clean the {N}?", "How is dirt taken off the {N}?"),
        ("What wash agent suits the {N}?",),
    ),
    _Attribute(
        "clearance",
        ("The gap between {S} and its seat must stay below {v}.", "{P} clearance may not exceed {v}."),
        (
            "What is the largest gap allowed around the {N}?",
            "How much space may there be between the {N} and its seat?",
        ),
        ("How much play is permitted on the {N}?",),
    ),
    _Attribute(
        "overload_indicator",
        ("{v} on the control panel signals that {S} is overloaded.", "Overload of {S} is signalled by {v}."),
        ("Which light warns that the {N} is overloaded?", "How does the panel show an overload of the {N}?"),
        ("What is the strain tell of the {N}?",),
    ),
    _Attribute(
        "speed",
        ("{S} turns at {v} under nominal load.", "Nominal shaft speed of {S} is {v}."),
        ("How fast does the {N} rotate?", "What is the rotation speed of the {N}?"),
        ("What is the spin rate of the {N}?",),
    ),
    _Attribute(
        "power",
        ("{S} draws {v} at full load.", "At full load {S} consumes {v}."),
        ("How much power does the {N} use?", "What is the electrical demand of the {N}?"),
        ("What is the draw of the {N}?",),
    ),
)
_INTRO = _Attribute(
    "location",
    ("{S} is installed in the {v}.",),
    ("Where is the {N} installed?", "Which part of the plant contains the {N}?"),
    ("Which loop hosts the {N}?",),
)
ATTRIBUTES: tuple[str, ...] = (_INTRO.name, *(a.name for a in _ATTRS))
"""The fact types, the first (``location``) always opens a document."""

_MAX_SENTENCES = len(ATTRIBUTES)


class _AllBut(Sequence[str]):
    """``items`` without the one at ``skip``, by index, without a copy: the other components a
    note may name (a list built per note made ``synthetic_documents`` quadratic in its count)."""

    def __init__(self, items: Sequence[str], skip: int) -> None:
        self.items, self.skip = items, skip

    def __len__(self) -> int:
        return len(self.items) - 1

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return self.items[i if i < self.skip else i + 1]


@lru_cache(maxsize=1)
def max_synthetic_documents() -> int:
    """The most notes :func:`synthetic_documents` can give one seed: two component types per
    distinct name root (4-9 letters), as :func:`_names` draws them."""
    combos = itertools.product(_ONSETS, _VOWELS, _CODAS, _ENDINGS)
    roots = {"".join(parts).capitalize() for parts in combos}
    return 2 * sum(1 for r in roots if 4 <= len(r) <= 9)


def _names(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
    """``n`` distinct (root, type) component names; most roots serve two types."""
    n_roots = max(1, (n + 1) // 2)
    roots: list[str] = []
    seen: set[str] = set()
    while len(roots) < n_roots:
        root = (
            _ONSETS[rng.integers(len(_ONSETS))]
            + _VOWELS[rng.integers(len(_VOWELS))]
            + _CODAS[rng.integers(len(_CODAS))]
            + _ENDINGS[rng.integers(len(_ENDINGS))]
        ).capitalize()
        if root not in seen and 4 <= len(root) <= 9:
            seen.add(root)
            roots.append(root)
    names: list[tuple[str, str]] = []
    used: set[tuple[str, str]] = set()
    i = 0
    while len(names) < n:
        root = roots[i % n_roots]
        kind = _TYPES[rng.integers(len(_TYPES))]
        if (root, kind) not in used:
            used.add((root, kind))
            names.append((root, kind))
            i += 1
    order = rng.permutation(n)
    return [names[j] for j in order]


def _value(attr: str, rng: np.random.Generator, others: Sequence[str]) -> str:
    pick = lambda xs: xs[rng.integers(len(xs))]  # noqa: E731
    if attr == "location":
        return f"{pick(_SYSTEMS)} of {pick(_PLANTS)}"
    if attr == "material":
        return f"{pick(_MATERIAL_A)} {pick(_MATERIAL_B)}"
    if attr == "max_temperature":
        return f"{5 * rng.integers(36, 145)} °C"
    if attr == "min_temperature":
        return f"{-5 * rng.integers(0, 13)} °C"
    if attr == "pressure":
        return f"{10 * rng.integers(12, 480)} kPa"
    if attr == "torque":
        return f"{5 * rng.integers(4, 90)} N·m"
    if attr == "inspection_interval":
        return f"{50 * rng.integers(2, 40)} operating hours"
    if attr == "replacement_interval":
        return f"{500 * rng.integers(4, 60)} hours"
    if attr == "lubricant":
        return f"{pick(_LUBE_A)}-{rng.integers(1, 10)} {pick(_LUBE_B)}"
    if attr == "failure_mode":
        return pick(_FAILURES)
    if attr == "calibration":
        letters = "ABCDEFGHKLMPRST"
        return f"{pick(letters)}{pick(letters)}-{rng.integers(100, 1000)}"
    if attr == "feeds":
        return pick(others)
    if attr == "weight":
        return f"{rng.integers(3, 900)} kg"
    if attr == "supplier":
        return f"{pick(_SUPPLIER_A)} {pick(_SUPPLIER_B)} of {pick(_TOWNS)}"
    if attr == "cleaning":
        return pick(_SOLVENTS)
    if attr == "clearance":
        return f"{rng.integers(2, 95) / 100:.2f} mm"
    if attr == "overload_indicator":
        return pick(_LAMPS)
    if attr == "speed":
        return f"{10 * rng.integers(30, 720)} rpm"
    if attr == "power":
        return f"{rng.integers(1, 400) / 2:g} kW"
    raise ValueError(attr)  # pragma: no cover - the table above is exhaustive


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _check_range(sentences_per_document: tuple[int, int]) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in sentences_per_document)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"sentences_per_document must be a pair (min, max), got {sentences_per_document!r}") from e
    if not 2 <= lo <= hi <= _MAX_SENTENCES:
        raise ConfigError(
            f"sentences_per_document={sentences_per_document!r}: expected 2 <= min <= max <= "
            f"{_MAX_SENTENCES} (one sentence per fact type)"
        )
    return lo, hi


def synthetic_documents(
    n_documents: int = 30,
    *,
    sentences_per_document: tuple[int, int] = (8, 14),
    seed: int = 0,
    full_name_rate: float = 0.4,
) -> list[RawDocument]:
    """``n_documents`` invented maintenance notes, one component each, with their facts.

    Document ``k`` has id ``doc{k:04d}``; its first sentence places the component, the others
    (their number drawn uniformly from ``sentences_per_document``) state one fact each about
    distinct attributes. A later sentence names the component in full with probability
    ``full_name_rate``, else refers to it as "the <type>", "the unit" or "it".
    Deterministic in ``seed``.
    """
    if isinstance(n_documents, bool) or not isinstance(n_documents, (int, np.integer)):
        raise ConfigError(f"n_documents must be an integer, got {n_documents!r}")
    if n_documents < 1:
        raise ConfigError(f"n_documents must be >= 1, got {n_documents}")
    if not 0.0 <= full_name_rate <= 1.0:
        raise ConfigError(f"full_name_rate must be in [0, 1], got {full_name_rate}")
    if n_documents > max_synthetic_documents():
        raise ConfigError(
            f"n_documents must be <= {max_synthetic_documents()} (distinct component names), "
            f"got {n_documents}; draw more with several seeds"
        )
    lo, hi = _check_range(sentences_per_document)
    rng = np.random.default_rng(seed)
    names = _names(rng, int(n_documents))
    full = [f"{root} {kind}" for root, kind in names]
    docs: list[RawDocument] = []
    for k, (root, kind) in enumerate(names):
        doc_id = f"doc{k:04d}"
        name = full[k]
        others: Sequence[str] = _AllBut(full, k) if len(full) > 1 else [f"{root} outlet"]
        n_sent = int(rng.integers(lo, hi + 1))
        chosen = rng.choice(len(_ATTRS), size=n_sent - 1, replace=False)
        attrs = [_INTRO, *(_ATTRS[i] for i in chosen)]
        parts: list[str] = []
        facts: list[Fact] = []
        offset = 0
        for si, attr in enumerate(attrs):
            value = _value(attr.name, rng, others)
            u = rng.random()
            if si == 0 or u < full_name_rate:
                subj, poss = f"the {name}", f"the {name}'s"
            elif u < full_name_rate + (1 - full_name_rate) * 0.6:
                ref = _SHORT_REFS[rng.integers(len(_SHORT_REFS))].format(type=kind)
                subj, poss = ref, f"{ref}'s"
            else:
                subj, poss = "it", "its"
            template = attr.sentences[rng.integers(len(attr.sentences))]
            sentence = _capitalise(template.format(S=subj, P=poss, v=value))
            questions = tuple(q.format(N=name) for q in (*attr.plain, *attr.jargon))
            jargon = tuple([False] * len(attr.plain) + [True] * len(attr.jargon))
            if si:
                offset += 1  # the joining space
            span = (offset, offset + len(sentence))
            offset = span[1]
            parts.append(sentence)
            facts.append(Fact(f"{doc_id}-s{si}", doc_id, si, span, sentence, name, attr.name, value, questions, jargon))
        docs.append(RawDocument(doc_id, f"{name} service notes", " ".join(parts), tuple(facts)))
    return docs


def synthetic_questions(
    documents: Sequence[RawDocument],
    *,
    n_queries: int | None = None,
    jargon_rate: float = 1 / 3,
    seed: int = 0,
) -> list[tuple[str, str, Fact]]:
    """Questions ``(query_id, text, fact)`` about the facts of ``documents``.

    With ``n_queries=None`` every fact gets one question; otherwise ``n_queries`` distinct
    facts are drawn without replacement (at most one question per fact). Each question is a
    jargon paraphrase with probability ``jargon_rate``, else a plain one. Query ids are
    ``{fact.id}-q{i}``, ``i`` indexing ``fact.questions``. Deterministic in ``seed``.
    """
    facts = [f for d in documents for f in d.facts]
    if not facts:
        raise ConfigError("synthetic_questions: the documents carry no facts")
    if not 0.0 <= jargon_rate <= 1.0:
        raise ConfigError(f"jargon_rate must be in [0, 1], got {jargon_rate}")
    rng = np.random.default_rng([seed, 1])
    if n_queries is None:
        picked = list(range(len(facts)))
    else:
        if isinstance(n_queries, bool) or not 1 <= int(n_queries) <= len(facts):
            raise ConfigError(
                f"n_queries={n_queries!r}: expected 1 to {len(facts)} (one question per fact "
                "at most; add documents for more)"
            )
        picked = sorted(rng.choice(len(facts), size=int(n_queries), replace=False).tolist())
    out: list[tuple[str, str, Fact]] = []
    for i in picked:
        fact = facts[i]
        want_jargon = bool(rng.random() < jargon_rate)
        pool = [j for j, is_j in enumerate(fact.jargon) if is_j == want_jargon]
        j = pool[rng.integers(len(pool))]
        out.append((f"{fact.id}-q{j}", fact.questions[j], fact))
    return out


def synthetic_dataset(
    n_documents: int = 30,
    *,
    n_queries: int | None = None,
    level: str = "sentence",
    seed: int = 0,
    name: str = "synthetic",
    sentences_per_document: tuple[int, int] = (8, 14),
    jargon_rate: float = 1 / 3,
) -> Dataset:
    """A retrieval dataset over :func:`synthetic_documents`, questions from
    :func:`synthetic_questions`.

    ``level="sentence"``: the corpus is every sentence (id ``{document_id}-s{k}``, no title)
    and a question's gold document is the one sentence stating its fact. ``level="document"``:
    the corpus is the whole documents (id ``doc{k:04d}``, with title) and the gold is the
    document holding the fact.

    ``meta`` holds the ground truth a training-data generator needs to hold out whole
    documents: ``query_document`` (query id -> source document id), ``query_fact`` (query id
    -> fact id) and ``jargon_queries`` (ids of the jargon questions).
    """
    if level not in SYNTHETIC_LEVELS:
        raise ConfigError(f"synthetic level {level!r} is not valid; expected one of {', '.join(SYNTHETIC_LEVELS)}")
    docs = synthetic_documents(n_documents, sentences_per_document=sentences_per_document, seed=seed)
    questions = synthetic_questions(docs, n_queries=n_queries, jargon_rate=jargon_rate, seed=seed)
    if level == "sentence":
        corpus = [Document(f.id, f.sentence) for d in docs for f in d.facts]
    else:
        corpus = [Document(d.id, d.text, d.title) for d in docs]
    queries = {qid: text for qid, text, _ in questions}
    qrels = {qid: {fact.id if level == "sentence" else fact.document_id: 1} for qid, _, fact in questions}
    meta: dict[str, Any] = {
        "format": "synthetic",
        "level": level,
        "seed": seed,
        "n_documents": n_documents,
        "sentences_per_document": list(sentences_per_document),
        "jargon_rate": jargon_rate,
        "query_document": {qid: fact.document_id for qid, _, fact in questions},
        "query_fact": {qid: fact.id for qid, _, fact in questions},
        "jargon_queries": sorted(qid for qid, _, fact in questions if fact.jargon[int(qid.rsplit("q", 1)[1])]),
    }
    return Dataset.build(name, corpus, queries, qrels, source=f"synthetic(seed={seed})", meta=meta)
