"""The local Docker mesh: the embedded default that ``make demo`` and the tests run on.

Nothing here touches a real node. It makes a Docker engine answer on a machine
without systemd, builds systemd node images without a registry, and starts a
few node containers on a network that looks like a tailnet.
"""
