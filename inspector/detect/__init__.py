"""Detectors that turn recorded runs into flags on tasks (plain Python and pandas, no Django)."""


def load_libraries() -> None:
    """Import what the analysis of an inspection uses (pandas, scikit-learn, scipy: about a
    second together), so a worker pays it at its start and not while an inspection waits."""
    import pandas  # noqa: F401
    import scipy.sparse  # noqa: F401
    import scipy.stats  # noqa: F401
    import sklearn.cluster  # noqa: F401
    import sklearn.ensemble  # noqa: F401
    import sklearn.feature_extraction.text  # noqa: F401

    import inspector.detect.depth  # noqa: F401
    import inspector.detect.flags  # noqa: F401
