"""Text for people: the tables of ``/usage``, ``chela usage``, ``chela status`` and
``chela pairing list`` (docs/architecture.md ``reports/``)."""
