"""Plumbing every command shares: safe output files, progress callbacks, optional extras, the shipped data's location."""
