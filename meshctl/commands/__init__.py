"""One module per meshctl command; each exposes a click command named ``command``."""
