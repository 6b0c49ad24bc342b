"""The playground: how one word's vectors change with context, layer by layer.

One function, :func:`explore_word`, does all the work of the app's Playground page (and of
anyone scripting the same comparison)::

    >>> from elmo_model import load_bilm
    >>> from probing.context.playground import explore_word, load_demo_set
    >>> demo = load_demo_set("bank")
    >>> result = explore_word(load_bilm("elmo-mini"), demo.texts, "bank", senses=demo.senses)
    >>> result.similarity.shape          # (L+1, N, N): layers x occurrences x occurrences
    (3, 12, 12)
    >>> result.sense_contrast()          # mean cosine within vs across senses, per layer

Text -> the project tokenizer -> the biLM (stateless: every sentence from a zero state, so a
sentence's vectors do not depend on its neighbours) -> cosine similarities -> a
:class:`PlaygroundResult` that round-trips through JSON.

Each item of ``sentences`` is one *context*: one line the user typed. The tokenizer may split it
into several sentences; their tokens are joined into one sequence and embedded together, so
"sentence k" always means the k-th non-blank item. Input is guarded rather than rejected: blank
items are skipped, long inputs are capped (:data:`MAX_SENTENCES` contexts,
:data:`MAX_TOKENS_PER_SENTENCE` tokens each, a window around the first occurrence of the word,
:data:`MAX_OCCURRENCES` occurrences compared),
and every such decision is written to ``result.notes`` in words a user can act on. Emoji and
other scripts go through unchanged (the character CNN reads UTF-8 bytes).
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from elmo_model.plumbing.resources import shipped_data
from probing.context.sense_contrast import SenseContrastTest, sense_contrast_test
from probing.engine.envelope import check_format, identity_of

if TYPE_CHECKING:
    from elmo_model.bilm.modules import BiLM
    from elmo_model.corpus.embedder import ElmoEmbedder

# elmo_model's biLM is imported inside the functions that embed: it imports torch (2+ s), and the app
# reads the demo sets and contexts from this module before it needs a model.

log = logging.getLogger(__name__)

#: The demo sentence sets (``data/demo/*.json``, format in ``data/demo/README.md``).
DEMO_DIR = shipped_data("demo")

#: At most this many non-blank contexts are embedded; the rest are dropped with a note.
MAX_SENTENCES = 32
#: At most this many tokens a context; longer ones keep a window around the target word.
MAX_TOKENS_PER_SENTENCE = 100
#: At most this many occurrences of the word are compared (the matrices are N x N).
MAX_OCCURRENCES = 64
#: Text beyond this many characters is not even tokenised (a pasted book stays fast).
MAX_CHARS = 50_000

RESULT_FORMAT = "elmo-workbench/playground"  # the "format" of the JSON, as probing.tagging.results does
RESULT_VERSION = 1


# --------------------------------------------------------------------------------------------
# Demo sets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoSet:
    """One demo sentence set: a target word, its senses (name -> gloss), labelled sentences,
    and each sentence's WordNet sense key (e.g. ``bank%1:17:01::``; None where the file gives
    none), so the demo's points share a legend with SemCor's."""

    word: str
    glosses: dict[str, str]
    texts: tuple[str, ...]
    senses: tuple[str, ...]  # one sense name per text
    sense_keys: tuple[str | None, ...] = ()  # one WordNet sense key (or None) per text

    def key_or_label(self) -> list[str]:
        """Per sentence: its WordNet sense key, else its sense name."""
        keys = self.sense_keys or (None,) * len(self.texts)
        return [k or s for k, s in zip(keys, self.senses)]

    def key_for_label(self, label: str | None) -> str | None:
        """The WordNet sense key every sentence labelled ``label`` has (None when they differ,
        when none has one, or for an unknown label)."""
        keys = {k for k, s in zip(self.sense_keys or (None,) * len(self.texts), self.senses) if s == label}
        return next(iter(keys)) if len(keys) == 1 else None

    @property
    def text(self) -> str:
        """The sentences one per line, each followed by ``| sense``, as the page's text box
        shows them (:func:`parse_labelled` reads it back)."""
        return "\n".join(f"{t} {LABEL_SEPARATOR} {s}" for t, s in zip(self.texts, self.senses))

    def sense_of(self, text: str) -> str | None:
        """The sense label of ``text`` if it is one of this set's sentences (else None)."""
        return dict(zip(self.texts, self.senses)).get(text.strip())


#: Ends a line of the Playground's text box to label its sense: ``The bank of the river. | river``.
LABEL_SEPARATOR = "|"


def parse_labelled(text: str | Sequence[str]) -> tuple[list[str], list[str | None]]:
    """Contexts and their sense labels from lines ``sentence | sense`` (the label is optional).

    Splits at the *last* ``|`` of a line; blank lines are skipped, items are stripped, at most
    :data:`MAX_SENTENCES` are kept (as :func:`split_contexts`). A line whose label is empty
    (``sentence |``) has no label. Returns ``(sentences, labels)`` of equal length.
    """
    sentences, labels = [], []
    for item in split_contexts(text):
        sentence, bar, label = item.rpartition(LABEL_SEPARATOR)
        if not bar:
            sentences.append(item)
            labels.append(None)
        elif sentence.strip():
            sentences.append(sentence.strip())
            labels.append(label.strip() or None)
    return sentences, labels


#: WordNet's sense-key part-of-speech digits (``play%2:33:00::`` is a verb; 5 is a satellite adjective)
WORDNET_POS = {"1": "noun", "2": "verb", "3": "adjective", "4": "adverb", "5": "adjective"}
_NAMED_POS = re.compile(r"\((noun|verb|adjective|adverb)\)\s*$", re.IGNORECASE)


def part_of_speech(label_or_key: str | None) -> str | None:
    """The part of speech a sense label gives: a WordNet sense key's (``play%2:33:00::``: verb), or a
    label ending in ``(noun)``, ``(verb)``, ``(adjective)`` or ``(adverb)``; None otherwise."""
    if not label_or_key:
        return None
    text = label_or_key.strip()
    if "%" in text:
        return WORDNET_POS.get(text.split("%", 1)[1][:1])
    named = _NAMED_POS.search(text)
    return named.group(1).lower() if named else None


def parts_of_speech_by_sense(senses: Sequence[str | None], keys: Sequence[str | None]) -> dict[str, set[str]]:
    """Sense label -> the parts of speech of its sentences (from ``keys``: each sentence's sense key
    or label, see :func:`part_of_speech`); senses with none known are left out."""
    found: dict[str, set[str]] = {}
    for sense, key in zip(senses, keys):
        pos = part_of_speech(key)
        if sense is not None and pos is not None:
            found.setdefault(sense, set()).add(pos)
    return found


def part_of_speech_confound(senses: Sequence[str | None], keys: Sequence[str | None]) -> str | None:
    """A warning when the sense labels line up with part of speech (every sense of one part of
    speech, not all the same): a gap between such senses can be part of speech, not sense. None when
    they share one, or when the parts of speech are not known for every sense."""
    by_sense = parts_of_speech_by_sense(senses, keys)
    labelled = {s for s in senses if s is not None}
    if len(labelled) < 2 or set(by_sense) != labelled or any(len(p) != 1 for p in by_sense.values()):
        return None
    if len({next(iter(p)) for p in by_sense.values()}) == 1:
        return None
    parts = "; ".join(f"{sense}: {next(iter(p))}" for sense, p in sorted(by_sense.items()))
    return (f"These senses differ in part of speech ({parts}): a gap between them can be part of speech, not "
            "sense. Hold it fixed: compare senses of one part of speech (the shipped demo sets are noun against noun).")


def word_form_confound(senses: Sequence[str | None], forms: Sequence[str]) -> str | None:
    """A warning when the sense labels line up with the word's spelling, occurrence by occurrence
    (every sense written one way, not all the same way: "Bank" for one sense, "bank" for the other).
    Layer 0 sees only the spelling, so it tells such senses apart too, and a gap in the LSTM layers
    can be spelling, not sense. None when a sense has two spellings, or all share one."""
    by_sense: dict[str, set[str]] = {}
    for sense, form in zip(senses, forms):
        if sense is not None:
            by_sense.setdefault(sense, set()).add(form)
    if len(by_sense) < 2 or any(len(f) != 1 for f in by_sense.values()):
        return None
    if len({next(iter(f)) for f in by_sense.values()}) == 1:
        return None
    parts = "; ".join(f"{sense}: '{next(iter(f))}'" for sense, f in sorted(by_sense.items()))
    return (f"These senses differ in word form ({parts}): layer 0, which sees only the spelling, tells them apart "
            "too, and a gap in the LSTM layers can be spelling, not sense. Hold it fixed: write the word the same "
            "way in every sentence (lower case, one form).")


def demo_set_names() -> list[str]:
    """Names of the shipped demo sets (``bank``, ``bark``, ``play``), sorted."""
    return sorted(p.stem for p in DEMO_DIR.glob("*.json"))


def load_demo_set(name: str, folder: Path | None = None) -> DemoSet:
    """Read ``data/demo/<name>.json`` (or ``<folder>/<name>.json``: the lesson's sets). Raises
    ``ValueError`` naming the file if it is missing or not in the documented format."""
    path = (folder or DEMO_DIR) / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"demo set {name!r}: {path} not found (shipped: {', '.join(demo_set_names()) or 'none'})")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        glosses = {str(k): str(v) for k, v in raw["senses"].items()}
        texts = tuple(str(s["text"]) for s in raw["sentences"])
        senses = tuple(str(s["sense"]) for s in raw["sentences"])
        sense_keys = tuple(str(s["sense_key"]) if s.get("sense_key") else None for s in raw["sentences"])
        word = str(raw["word"])
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: not a demo set ({err!r}); see {DEMO_DIR / 'README.md'}") from None
    unknown = sorted(set(senses) - set(glosses))
    if unknown:
        raise ValueError(f"{path}: sentences use senses {unknown} not listed in 'senses' {sorted(glosses)}")
    bad = [k for k in sense_keys if k is not None and not k.startswith(f"{word}%")]
    if bad:
        raise ValueError(f"{path}: sense_key {bad[0]!r} is not a WordNet key of {word!r} (e.g. {word}%1:17:01::)")
    return DemoSet(word, glosses, texts, senses, sense_keys)


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------


@dataclass
class PlaygroundResult:
    """What :func:`explore_word` found. N = occurrences of the word, L+1 = output layers,
    T = tokens of the focus sentence. Indices are 0-based; the page shows them 1-based.

    - ``model_name``, ``model_identity``: the biLM (its identity, ``elmo_model.bilm.identity``).
    - ``sentences``: the contexts used (blank ones skipped, at most :data:`MAX_SENTENCES`).
    - ``tokens[k]``: the tokens of context k that were embedded (a window if it was long);
      ``token_offsets[k]`` tokens were cut from its start.
    - ``positions[k]``: where the word is in ``tokens[k]`` (case-insensitive; may be empty).
    - ``senses[k]``: the caller's label for context k, or None.
    - ``occurrences``: (context, token) of each occurrence, in reading order; row/column i of
      ``similarity`` and column i of ``norms`` belong to occurrence i.
    - ``similarity``: (L+1, N, N) cosine similarity between occurrences, per layer (unitless,
      -1..1). Layer 0 is context-free, so identical spellings give exactly 1.0 there.
    - ``norms``: (L+1, N) Euclidean norm of each occurrence's vector, per layer.
    - ``focus_sentence``: the context of the token-by-token matrix (None if there is none);
      ``token_similarity``: (L+1, T, T) cosine similarity between its tokens, per layer.
    - ``notes``: what was skipped, capped or not found, in plain words.
    """

    word: str
    model_name: str
    model_identity: str
    layer_names: list[str]
    sentences: list[str]
    tokens: list[list[str]]
    token_offsets: list[int]
    positions: list[list[int]]
    senses: list[str | None]
    occurrences: list[tuple[int, int]]
    similarity: np.ndarray
    norms: np.ndarray
    focus_sentence: int | None
    token_similarity: np.ndarray
    notes: list[str] = field(default_factory=list)

    _ARRAYS = ("similarity", "norms", "token_similarity")

    def __eq__(self, other: object) -> bool:
        """Field by field; the arrays element-wise (so ``from_json(r.to_json()) == r``)."""
        if not isinstance(other, PlaygroundResult):
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name)) if f.name in self._ARRAYS
                   else getattr(self, f.name) == getattr(other, f.name) for f in fields(self))

    @property
    def n_layers(self) -> int:
        """L+1: the char-CNN layer plus one per LSTM layer."""
        return len(self.layer_names)

    def occurrence_labels(self) -> list[str]:
        """One short label per occurrence: ``S3`` (``S3#2`` for a second one in context 3),
        followed by the sense in brackets when the context has one."""
        labels = []
        for k, t in self.occurrences:
            label = f"S{k + 1}" if len(self.positions[k]) == 1 else f"S{k + 1}#{self.positions[k].index(t) + 1}"
            if self.senses[k]:
                label += f" ({self.senses[k]})"
            labels.append(label)
        return labels

    def sense_contrast(self) -> dict[str, list[float]] | None:
        """Mean cosine similarity per layer over pairs of occurrences with the same sense
        (``within``) and with different senses (``across``); None unless both kinds of pair
        exist. A contextual layer separates senses: within > across."""
        labels = [self.senses[k] for k, _ in self.occurrences]
        n = len(labels)
        same = [(i, j) for i in range(n) for j in range(i + 1, n)
                if labels[i] is not None and labels[i] == labels[j]]
        diff = [(i, j) for i in range(n) for j in range(i + 1, n)
                if labels[i] is not None and labels[j] is not None and labels[i] != labels[j]]
        if not same or not diff:
            return None
        si, sj = map(list, zip(*same))
        di, dj = map(list, zip(*diff))
        return {"within": self.similarity[:, si, sj].mean(axis=1).tolist(),
                "across": self.similarity[:, di, dj].mean(axis=1).tolist()}

    def contrast_missing_reason(self) -> str | None:
        """Why :meth:`sense_contrast` has nothing to compare, in words a user can act on
        (None when it has both kinds of pair)."""
        labels = [self.senses[k] for k, _ in self.occurrences]
        named = [x for x in labels if x is not None]
        if not self.occurrences:
            return "the word occurs in none of the sentences."
        if not named:
            return ("no sentence has a sense label. End each line with `| sense`, e.g. "
                    "`We sat on the bank of the river. | river`.")
        kinds = sorted(set(named))
        unlabelled = len(labels) - len(named)
        tail = f" ({unlabelled} occurrence(s) have no label and are left out)" if unlabelled else ""
        if len(kinds) < 2:
            return f"every labelled sentence has the sense {kinds[0]!r}: label at least two senses{tail}."
        if self.sense_contrast() is None:
            return f"no sense labels two occurrences, so there is no same-sense pair{tail}."
        return None

    def sense_contrast_test(self, n_resamples: int = 2000, seed: int = 0) -> "SenseContrastTest | None":
        """:meth:`sense_contrast` with its uncertainty, per layer: the gap (same-sense minus
        different-sense mean cosine), a bootstrap 95% interval of the gap resampling sentences,
        and a one-sided permutation p-value (sense labels shuffled across sentences).

        Occurrences of one sentence move together (the unit is the sentence, not the pair:
        pairs share sentences and are not independent). None when :meth:`sense_contrast` is.
        """
        contrast = self.sense_contrast()
        if contrast is None:
            return None
        return sense_contrast_test(self.similarity, self.occurrences, self.senses, contrast, n_resamples, seed)

    def to_json(self) -> str:
        """JSON text (numbers as floats; arrays as nested lists); :meth:`from_json` inverts it."""
        data = {
            "format": RESULT_FORMAT, "version": RESULT_VERSION,
            "word": self.word, "model_name": self.model_name, "model_identity": self.model_identity,
            "layer_names": self.layer_names,
            "sentences": self.sentences, "tokens": self.tokens, "token_offsets": self.token_offsets,
            "positions": self.positions, "senses": self.senses,
            "occurrences": [list(o) for o in self.occurrences],
            "similarity": self.similarity.tolist(), "norms": self.norms.tolist(),
            "focus_sentence": self.focus_sentence, "token_similarity": self.token_similarity.tolist(),
            "notes": self.notes,
        }
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "PlaygroundResult":
        """Inverse of :meth:`to_json`. Raises ``ValueError`` for JSON of another format/version."""
        data = json.loads(text)
        check_format(data, RESULT_FORMAT, RESULT_VERSION, "playground result")
        layers = len(data["layer_names"])
        n = len(data["occurrences"])
        t = len(data["tokens"][data["focus_sentence"]]) if data["focus_sentence"] is not None else 0
        return cls(word=data["word"], model_name=data["model_name"], model_identity=identity_of(data),
                   layer_names=list(data["layer_names"]),
                   sentences=list(data["sentences"]), tokens=[list(s) for s in data["tokens"]],
                   token_offsets=list(data["token_offsets"]), positions=[list(p) for p in data["positions"]],
                   senses=list(data["senses"]), occurrences=[(int(k), int(i)) for k, i in data["occurrences"]],
                   similarity=np.asarray(data["similarity"], dtype=np.float64).reshape(layers, n, n),
                   norms=np.asarray(data["norms"], dtype=np.float64).reshape(layers, n),
                   focus_sentence=data["focus_sentence"],
                   token_similarity=np.asarray(data["token_similarity"], dtype=np.float64).reshape(layers, t, t),
                   notes=list(data["notes"]))


# --------------------------------------------------------------------------------------------
# The computation
# --------------------------------------------------------------------------------------------


def word_form(token: str) -> str:
    """The form two tokens must share to count as the same word: NFC (an accent typed as two code
    points is the same word), case-folded."""
    return unicodedata.normalize("NFC", token).casefold()


def cosine_matrix(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``a`` (M, D) against rows of ``b`` (N, D) -> (M, N) cosine similarities in
    float64, clipped to [-1, 1]. A zero vector has similarity 0 to everything."""
    a = np.asarray(a, dtype=np.float64)
    b = a if b is None else np.asarray(b, dtype=np.float64)

    def unit(x: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(x, axis=-1, keepdims=True)
        return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)

    return np.clip(unit(a) @ unit(b).T, -1.0, 1.0)


def layer_names(n_layers: int) -> list[str]:
    """Display names for L+1 output layers: layer 0 is the context-free char CNN."""
    return ["layer 0 (char CNN, context-free)"] + [f"layer {j} (LSTM {j})" for j in range(1, n_layers)]


def split_contexts(text: str | Sequence[str]) -> list[str]:
    """The contexts :func:`explore_word` numbers: the non-blank items (lines of ``text``),
    stripped, at most :data:`MAX_SENTENCES`. Context k is "sentence k+1" in notes and labels."""
    items = text.split("\n") if isinstance(text, str) else [str(s) for s in text]
    return [s.strip() for s in items if s.strip()][:MAX_SENTENCES]


def contexts_cap_note(text: str | Sequence[str]) -> str | None:
    """What :func:`split_contexts` leaves out, as a note for the page ("40 sentences given; only
    the first 32 are used."), or None when every context is used."""
    items = text.split("\n") if isinstance(text, str) else [str(s) for s in text]
    n = sum(1 for s in items if s.strip())
    if n <= MAX_SENTENCES:
        return None
    return f"{n:,} sentences given; only the first {MAX_SENTENCES} are used."


def _target_form(word: str, notes: list[str]) -> str | None:
    """The folded token to look for, or None (with a note) when ``word`` is not one token."""
    from elmo_model.text.tokenizer import tokenize_words  # lazy: it loads NLTK, and the page imports this module

    word = word.strip()
    if not word:
        notes.append("No target word: type the word to compare across the sentences.")
        return None
    if len(word) > 100:
        notes.append(f"The target word is {len(word):,} characters long; type a single word.")
        return None
    pieces = tokenize_words(word)
    if len(pieces) != 1:
        notes.append(f"The target {word!r} is {len(pieces)} tokens for the tokenizer "
                     f"({', '.join(repr(p) for p in pieces)}); type a single word.")
        return None
    return word_form(pieces[0])


def _window(tokens: list[str], positions: list[int], limit: int) -> int:
    """Start of a ``limit``-token window over ``tokens``, centred on the first position."""
    if len(tokens) <= limit:
        return 0
    centre = positions[0] if positions else 0
    return max(0, min(centre - limit // 2, len(tokens) - limit))


def _kept_contexts(sentences: list[str], senses: Sequence[str | None] | None,
                   notes: list[str]) -> list[tuple[str, str | None]]:
    """The non-blank contexts, stripped, with their labels: at most :data:`MAX_SENTENCES`.
    Blank items are not sentences (a blank line in the text box); numbering skips them."""
    labels = list(senses) if senses is not None else [None] * len(sentences)
    kept = [(s.strip(), labels[i]) for i, s in enumerate(sentences) if s.strip()]
    if not kept:
        notes.insert(0, "No text: type at least one sentence (one a line) or pick a demo set.")
    if len(kept) > MAX_SENTENCES:
        notes.append(f"{len(kept):,} sentences given; only the first {MAX_SENTENCES} are used.")
        kept = kept[:MAX_SENTENCES]
    return kept


def _context_window(text: str, k: int, target: str | None, word: str,
                    notes: list[str]) -> tuple[str, list[str], int, list[int]]:
    """Context ``k``'s text (capped at :data:`MAX_CHARS`), its tokens (a window of at most
    :data:`MAX_TOKENS_PER_SENTENCE` around the first ``target``), the window's start and the
    target's positions in it."""
    from elmo_model.text.tokenizer import tokenize  # lazy: it loads NLTK, and the page imports this module

    if len(text) > MAX_CHARS:
        notes.append(f"Sentence {k + 1} is {len(text):,} characters long; only the first {MAX_CHARS:,} are read.")
        text = text[:MAX_CHARS]
    words = [t for sentence in tokenize(text) for t in sentence]
    found = [i for i, t in enumerate(words) if target is not None and word_form(t) == target]
    start = _window(words, found, MAX_TOKENS_PER_SENTENCE)
    if start or len(words) > MAX_TOKENS_PER_SENTENCE:
        end = start + MAX_TOKENS_PER_SENTENCE
        notes.append(f"Sentence {k + 1} has {len(words):,} tokens; only tokens {start + 1}-{end} "
                     f"(around the first {word.strip()!r}) are used." if found else
                     f"Sentence {k + 1} has {len(words):,} tokens; only the first {MAX_TOKENS_PER_SENTENCE} are used.")
        words = words[start:end]
        found = [i - start for i in found if start <= i < end]
    if target is not None and not found:
        notes.append(f"{word.strip()!r} not found in sentence {k + 1}.")
    return text, words, start, found


def _compare_occurrences(activations: list[np.ndarray], positions: list[list[int]], n_layers: int,
                         word: str, notes: list[str]) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """The occurrences compared (at most :data:`MAX_OCCURRENCES`), their (L+1, N, N) cosine
    similarities and their (L+1, N) norms."""
    occurrences = [(k, i) for k, found in enumerate(positions) for i in found]
    if len(occurrences) > MAX_OCCURRENCES:
        notes.append(f"{word.strip()!r} occurs {len(occurrences):,} times; only the first "
                     f"{MAX_OCCURRENCES} occurrences are compared.")
        occurrences = occurrences[:MAX_OCCURRENCES]
    if not occurrences:
        return occurrences, np.zeros((n_layers, 0, 0)), np.zeros((n_layers, 0))
    vectors = np.stack([activations[k][:, i] for k, i in occurrences], axis=1)  # (L+1, N, 2P)
    similarity = np.stack([cosine_matrix(vectors[j]) for j in range(n_layers)])
    return occurrences, similarity, np.linalg.norm(vectors.astype(np.float64), axis=-1)


def _focus_matrix(activations: list[np.ndarray], positions: list[list[int]], focus_sentence: int | None,
                  n_layers: int, notes: list[str]) -> tuple[int | None, np.ndarray]:
    """The focus context (default: the first holding the word) and its (L+1, T, T)
    token-by-token cosine similarities."""
    n_contexts = len(positions)
    if focus_sentence is None:
        focus_sentence = next((k for k, found in enumerate(positions) if found), 0 if n_contexts else None)
    elif not 0 <= focus_sentence < n_contexts:
        notes.append(f"There is no sentence {focus_sentence + 1} (there are {n_contexts}); "
                     f"showing sentence 1's tokens instead." if n_contexts else
                     "No sentence to show token by token.")
        focus_sentence = 0 if n_contexts else None
    if focus_sentence is None:
        return None, np.zeros((n_layers, 0, 0))
    return focus_sentence, np.stack([cosine_matrix(activations[focus_sentence][j]) for j in range(n_layers)])


def explore_word(model: "BiLM | ElmoEmbedder", sentences: Sequence[str] | str, word: str,
                 focus_sentence: int | None = None, senses: Sequence[str | None] | None = None) -> PlaygroundResult:
    """Embed ``sentences`` and compare the vectors of ``word`` across them, layer by layer.

    - ``model``: a loaded ``BiLM`` (``elmo_model.load_bilm``) or an ``ElmoEmbedder``.
    - ``sentences``: raw-text contexts, one an item (or one string, one context a line).
    - ``word``: the target; matched against tokens case-insensitively (after NFC).
    - ``focus_sentence``: 0-based index (into the non-blank contexts) of the sentence whose
      token-by-token matrix to compute; default: the first context holding the word.
    - ``senses``: an optional label per item of ``sentences`` (e.g. from a demo set), used
      for labels and :meth:`PlaygroundResult.sense_contrast`.

    Never raises for bad text: empty input, a word not found, over-long input, any script or
    emoji give a result (possibly with no occurrences) whose ``notes`` say what happened.
    Cost: one stateless biLM pass over at most 32 x 100 tokens; matrices at most 64 x 64.
    """
    # lazy: the app's page imports this module at first paint, before torch and NLTK are wanted
    from elmo_model.bilm.identity import model_identity
    from elmo_model.corpus.embedder import ElmoEmbedder

    embedder = model if isinstance(model, ElmoEmbedder) else ElmoEmbedder(model)
    if isinstance(sentences, str):
        sentences = sentences.split("\n")
    sentences = [str(s) for s in sentences]
    if senses is not None and len(senses) != len(sentences):
        raise ValueError(f"senses has {len(senses)} labels for {len(sentences)} sentences")
    notes: list[str] = []
    target = _target_form(word, notes)
    kept = _kept_contexts(sentences, senses, notes)
    texts, tokens, offsets, positions = [], [], [], []
    for k, (text, _) in enumerate(kept):
        text, words, start, found = _context_window(text, k, target, word, notes)
        texts.append(text)
        tokens.append(words)
        offsets.append(start)
        positions.append(found)

    n_layers = embedder.n_layers
    activations = list(embedder.embed_sentences(tokens)) if tokens else []  # each (L+1, T_k, 2P)
    occurrences, similarity, norms = _compare_occurrences(activations, positions, n_layers, word, notes)
    focus_sentence, token_similarity = _focus_matrix(activations, positions, focus_sentence, n_layers, notes)
    model_name = str(getattr(embedder.model, "name", None) or getattr(embedder.model, "source", "") or "biLM")
    return PlaygroundResult(
        word=word.strip(), model_name=model_name, model_identity=model_identity(embedder.model),
        layer_names=layer_names(n_layers), sentences=texts,
        tokens=tokens, token_offsets=offsets, positions=positions, senses=[sense for _, sense in kept],
        occurrences=occurrences, similarity=similarity, norms=norms, focus_sentence=focus_sentence,
        token_similarity=token_similarity, notes=notes)
