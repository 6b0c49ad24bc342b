"""The biLM's hyperparameters, mirroring AllenNLP / bilm-tf ``options.json``.

An ``options.json`` looks like::

    {"char_cnn": {"embedding": {"dim": 16},
                  "filters": [[1, 32], [2, 32], ..., [7, 1024]],
                  "n_highway": 2, "n_characters": 262,
                  "max_characters_per_token": 50, "activation": "relu"},
     "lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2,
              "cell_clip": 3, "proj_clip": 3, "use_skip_connections": true}}

Training-only keys that bilm-tf also writes (``bidirectional``, ``dropout``, ``n_tokens_vocab``,
``unroll_steps``, ...) are kept in ``extra`` so that a file read and written again loses nothing.

Every number that shapes the model is checked here, once, for the options file, the trainer's
flags (``TrainConfig.problems``) and model cards alike: the rules are the functions below
(``integer_problem``, ``clip_problem``, ``filters_problem``, ``number_problem``), each returning
what a value must be, or None. A clip follows bilm-tf's convention: absent (or null) means no
clip (TensorFlow's ``LSTMCell(cell_clip=None)``); a value must be a finite number > 0, since
clamping to [-c, c] with c <= 0 or NaN would rewrite every vector.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..plumbing.io_safety import atomic_write_text

ACTIVATIONS = ("relu", "tanh")
MIN_CHARACTERS_PER_TOKEN = 3  # begin-of-word, one byte, end-of-word


# ---- the rules: each returns what the value must be, or None when it is fine -------------------

def _is_integer(value: Any) -> bool:
    """An int (not a bool), or a float with an integer value (JSON ``4.0``)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())


def integer_problem(value: Any, minimum: int = 1) -> str | None:
    """None when ``value`` is an integer >= ``minimum``, else the rule."""
    return None if _is_integer(value) and value >= minimum else f"must be an integer >= {minimum}"


def number_problem(value: Any, low: float | None = None, high: float | None = None, *,
                   low_open: bool = False, high_open: bool = False) -> str | None:
    """None when ``value`` is a finite number within the bounds (closed unless ``*_open``), else
    the rule ("must be a finite number > 0", "must be a finite number in [0, 1)")."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and (low is None or (value > low if low_open else value >= low))
          and (high is None or (value < high if high_open else value <= high)))
    if ok:
        return None
    if high is None and low is None:
        return "must be a finite number"
    if high is None:
        return f"must be a finite number {'>' if low_open else '>='} {low:g}"
    if low is None:
        return f"must be a finite number {'<' if high_open else '<='} {high:g}"
    return f"must be a finite number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def clip_problem(value: Any) -> str | None:
    """A cell or projection clip: None (no clip, bilm-tf's convention) or a finite number > 0."""
    if value is None or number_problem(value, 0, low_open=True) is None:
        return None
    return "must be a finite number > 0 (or absent / null for no clip)"


def filters_problem(value: Any, max_characters_per_token: int = 50) -> str | None:
    """The character CNN's filters: a non-empty list of [width, n_filters], 1 <= width <=
    ``max_characters_per_token``, n_filters >= 1."""
    rule = (f"must be a non-empty list of [width, n_filters] pairs with 1 <= width <= "
            f"{max_characters_per_token} and n_filters >= 1")
    if not isinstance(value, (list, tuple)) or not value:
        return rule
    for pair in value:
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2 or integer_problem(pair[0])
                or integer_problem(pair[1]) or pair[0] > max_characters_per_token):
            return rule
    return None


def show_value(value: Any) -> str:
    """A value as an error line shows it: ``nan``, ``-3.0``, ``[]``, ``"x"``."""
    if isinstance(value, float):
        return repr(value)
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


def options_problems(options: dict[str, Any]) -> list[str]:
    """What is wrong with the numbers of an ``options.json`` dictionary, as ``field = value:
    rule`` items (empty: nothing). Expects the ``char_cnn`` and ``lstm`` objects to exist."""
    c, l = options["char_cnn"], options["lstm"]
    embedding = c.get("embedding")
    max_chars = c.get("max_characters_per_token", 50)
    values = [
        ("char_cnn.embedding.dim", embedding.get("dim") if isinstance(embedding, dict) else embedding,
         integer_problem),
        ("char_cnn.max_characters_per_token", max_chars, lambda v: integer_problem(v, MIN_CHARACTERS_PER_TOKEN)),
        ("char_cnn.filters", c.get("filters"),
         lambda v: filters_problem(v, int(max_chars) if integer_problem(max_chars, 1) is None else 50)),
        ("char_cnn.n_highway", c.get("n_highway"), lambda v: integer_problem(v, 0)),
        ("char_cnn.n_characters", c.get("n_characters", 262), integer_problem),
        ("char_cnn.activation", c.get("activation", "relu"),
         lambda v: None if v in ACTIVATIONS else f"must be one of {', '.join(map(repr, ACTIVATIONS))}"),
        ("lstm.dim", l.get("dim"), integer_problem),
        ("lstm.projection_dim", l.get("projection_dim"), integer_problem),
        ("lstm.n_layers", l.get("n_layers", 2), integer_problem),
        ("lstm.cell_clip", l.get("cell_clip"), clip_problem),
        ("lstm.proj_clip", l.get("proj_clip"), clip_problem),
        ("lstm.use_skip_connections", l.get("use_skip_connections", False),
         lambda v: None if isinstance(v, bool) else "must be true or false"),
    ]
    return [f"{name} = {show_value(value)}: {problem}" for name, value, rule in values
            if (problem := rule(value))]


@dataclass(frozen=True)
class CharCnnConfig:
    """Character CNN: embedding, convolutions (width, n_filters), highway layers."""

    embedding_dim: int = 16
    filters: tuple[tuple[int, int], ...] = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
    n_highway: int = 2
    n_characters: int = 262
    max_characters_per_token: int = 50
    activation: str = "relu"

    @property
    def n_filters(self) -> int:
        """Total number of convolution filters (the highway width)."""
        return sum(n for _, n in self.filters)


@dataclass(frozen=True)
class LstmConfig:
    """Stacked LSTM with projection; one stack per direction."""

    dim: int = 4096
    projection_dim: int = 512
    n_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True


@dataclass(frozen=True)
class ElmoConfig:
    """The whole biLM. ``extra`` holds options.json keys the model does not use."""

    char_cnn: CharCnnConfig = field(default_factory=CharCnnConfig)
    lstm: LstmConfig = field(default_factory=LstmConfig)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        problems = options_problems(self.to_options())
        if problems:
            raise ValueError("invalid ELMo options: " + "; ".join(problems))

    @property
    def output_dim(self) -> int:
        """Width of every output layer: [forward; backward] = 2 * projection_dim."""
        return 2 * self.lstm.projection_dim

    @property
    def n_output_layers(self) -> int:
        """Layer 0 (token embedding) plus one per LSTM layer."""
        return 1 + self.lstm.n_layers

    # ---- options.json round trip -------------------------------------------------------------
    def to_options(self) -> dict[str, Any]:
        """The AllenNLP / bilm-tf ``options.json`` dictionary."""
        c, l = self.char_cnn, self.lstm
        char_cnn = {
            "embedding": {"dim": c.embedding_dim},
            "filters": [list(f) for f in c.filters],
            "n_highway": c.n_highway,
            "n_characters": c.n_characters,
            "max_characters_per_token": c.max_characters_per_token,
            "activation": c.activation,
        }
        lstm = {"dim": l.dim, "projection_dim": l.projection_dim, "n_layers": l.n_layers,
                "use_skip_connections": l.use_skip_connections}
        if l.cell_clip is not None:
            lstm["cell_clip"] = l.cell_clip
        if l.proj_clip is not None:
            lstm["proj_clip"] = l.proj_clip
        options = dict(self.extra)
        options["char_cnn"] = {**options.get("char_cnn", {}), **char_cnn}
        options["lstm"] = {**options.get("lstm", {}), **lstm}
        return options

    @classmethod
    def from_options(cls, options: dict[str, Any], source: str = "options") -> "ElmoConfig":
        """Build from an ``options.json`` dictionary; ``source`` names the file in errors."""
        c, l = options.get("char_cnn"), options.get("lstm")
        if not isinstance(c, dict) or not isinstance(l, dict):
            raise ValueError(f"{source}: not an ELMo options file (it needs char_cnn and lstm objects)")
        missing = [name for name, present in (
            ("char_cnn.embedding.dim", isinstance(c.get("embedding"), dict) and "dim" in c["embedding"]),
            ("char_cnn.filters", "filters" in c), ("char_cnn.n_highway", "n_highway" in c),
            ("lstm.dim", "dim" in l), ("lstm.projection_dim", "projection_dim" in l)) if not present]
        if missing:
            raise ValueError(f"{source}: not an ELMo options file ({', '.join(missing)} missing)")
        problems = options_problems(options)
        if problems:
            raise ValueError(f"{source}: " + "; ".join(problems))
        char_cnn = CharCnnConfig(embedding_dim=int(c["embedding"]["dim"]),
                                 filters=tuple((int(w), int(n)) for w, n in c["filters"]),
                                 n_highway=int(c["n_highway"]),
                                 n_characters=int(c.get("n_characters", 262)),
                                 max_characters_per_token=int(c.get("max_characters_per_token", 50)),
                                 activation=str(c.get("activation", "relu")))
        lstm = LstmConfig(dim=int(l["dim"]),
                          projection_dim=int(l["projection_dim"]),
                          n_layers=int(l.get("n_layers", 2)),
                          cell_clip=None if l.get("cell_clip") is None else float(l["cell_clip"]),
                          proj_clip=None if l.get("proj_clip") is None else float(l["proj_clip"]),
                          use_skip_connections=bool(l.get("use_skip_connections", False)))
        return cls(char_cnn=char_cnn, lstm=lstm, extra={k: v for k, v in options.items()})

    @classmethod
    def from_json(cls, path: str | Path) -> "ElmoConfig":
        """Read an ``options.json`` file."""
        path = Path(path)
        try:
            options = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"{path}: options file not found") from None
        except IsADirectoryError:
            raise ValueError(f"{path}: is a directory, expected an options.json file") from None
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); save it as UTF-8 JSON") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from err
        if not isinstance(options, dict):
            raise ValueError(f"{path}: expected a JSON object with char_cnn and lstm, got {type(options).__name__}")
        return cls.from_options(options, source=str(path))

    def to_json(self, path: str | Path) -> None:
        """Write ``options.json`` (atomically)."""
        atomic_write_text(path, json.dumps(self.to_options(), indent=2) + "\n")

    def describe(self) -> dict[str, Any]:
        """A flat JSON-able summary (for model cards and result objects)."""
        return {"char_cnn": asdict(self.char_cnn), "lstm": asdict(self.lstm)}
