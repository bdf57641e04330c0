"""Detectors that turn recorded runs into flags on tasks (plain Python and pandas, no Django)."""
