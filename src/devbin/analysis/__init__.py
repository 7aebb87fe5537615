"""Analyses over the unified model (vendor-neutral)."""
