"""Syntax: dependency trees and their metrics, the structural probe, edge probes on gold arcs, the report's syntax sections."""
