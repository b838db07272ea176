"""Operations: what meshctl does to a mesh, one module per use case.

Each decides and acts, raising MeshctlError subclasses with what went wrong and what to do; the
command line (``meshctl/commands/``) parses and prints. An operation reads and writes the mesh
folder through the store (``meshctl.mesh``), runs playbooks through the one Ansible session
(``meshctl.session``) and asks providers through ``meshctl.cloud``. Every change to mesh.yml
happens under the mesh lock, and a node is marked ``active`` only after its playbook run succeeded.
Layers import downward only (``scripts/import_graph.py``).
"""
