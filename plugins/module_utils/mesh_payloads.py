# Copyright: meshctl contributors; Apache-2.0
"""Where the modules' payloads are kept between runs: the one name of the variable that says so.

The collection's callback meshctl.mesh.preload keeps each module's payload (the module zipped with
the module_utils it imports, which Ansible builds again in every run) in the folder this variable
names; meshctl's runs set it to the user's cache folder (meshctl/runner.py). Plain names, no Ansible.
"""

from __future__ import annotations

CACHE_VARIABLE = "MESHCTL_ANSIBALLZ_CACHE"
