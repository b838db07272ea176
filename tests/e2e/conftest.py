"""The end-to-end files' shared beds (tests/e2e/rented.py): pytest finds their fixtures here."""

from tests.e2e.rented import pods_head, rented  # noqa: F401 (fixtures, used by name)
