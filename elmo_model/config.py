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
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .io_safety import atomic_write_text


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
        problems = []
        if self.char_cnn.activation not in ("relu", "tanh"):
            problems.append(f"char_cnn.activation must be 'relu' or 'tanh', got {self.char_cnn.activation!r}")
        if self.char_cnn.max_characters_per_token < 3:
            problems.append("char_cnn.max_characters_per_token must be at least 3")
        for width, n in self.char_cnn.filters:
            if width < 1 or n < 1 or width > self.char_cnn.max_characters_per_token:
                problems.append(f"bad char_cnn filter [{width}, {n}]")
        if self.lstm.n_layers < 1:
            problems.append("lstm.n_layers must be at least 1")
        if self.lstm.dim < 1 or self.lstm.projection_dim < 1:
            problems.append("lstm.dim and lstm.projection_dim must be positive")
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
        try:
            c, l = options["char_cnn"], options["lstm"]
            char_cnn = CharCnnConfig(
                embedding_dim=int(c["embedding"]["dim"]),
                filters=tuple((int(w), int(n)) for w, n in c["filters"]),
                n_highway=int(c["n_highway"]),
                n_characters=int(c.get("n_characters", 262)),
                max_characters_per_token=int(c.get("max_characters_per_token", 50)),
                activation=str(c.get("activation", "relu")),
            )
            lstm = LstmConfig(
                dim=int(l["dim"]),
                projection_dim=int(l["projection_dim"]),
                n_layers=int(l.get("n_layers", 2)),
                cell_clip=None if l.get("cell_clip") is None else float(l["cell_clip"]),
                proj_clip=None if l.get("proj_clip") is None else float(l["proj_clip"]),
                use_skip_connections=bool(l.get("use_skip_connections", False)),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{source}: not an ELMo options file ({type(err).__name__}: {err})") from err
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
