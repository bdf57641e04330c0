"""The benchmarks. Most are scripts run by path (`.venv/bin/python bench/NAME.py`), importing
each other by bare name from bench/; the planted-defect benchmark is the package bench.planted,
run as `.venv/bin/python -m bench.planted` from the repository's root."""
