"""Syntax: dependency trees and their metrics, the structural probe, edge probes on gold arcs, the report's syntax sections."""


def __getattr__(name: str):
    """``probing.syntax`` was the structural probe's module before syntax became this room: its
    names (``from probing.syntax import SyntaxConfig, run_structural``) still resolve, on first use."""
    from probing.syntax import structural

    try:
        return getattr(structural, name)
    except AttributeError:
        raise AttributeError(f"module 'probing.syntax' has no attribute {name!r}") from None
