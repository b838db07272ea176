"""The end-to-end files' shared bed (tests/e2e/rented.py): pytest finds its fixture here."""

from tests.e2e.rented import rented  # noqa: F401 (a fixture, used by name)
