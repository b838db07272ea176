"""The nfs_server role's export templates, rendered line by line."""

from pathlib import Path

import jinja2
import pytest

TEMPLATES = Path(__file__).resolve().parents[3] / "roles" / "nfs_server" / "templates"


def comment(text):
    return "#\n" + "\n".join(f"# {line}" for line in text.splitlines()) + "\n#"


def ternary(value, yes, no):
    return yes if value else no


def to_bool(value):  # Ansible's `bool` filter, for the values these templates get
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "yes", "1", "on")


@pytest.fixture
def render():
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined, trim_blocks=True
    )
    env.filters.update(comment=comment, ternary=ternary, bool=to_bool)

    def _render(name, **variables):
        base = {
            "ansible_managed": "Ansible managed",
            "nfs_server_export_path": "/mnt/shared-slurm",
            "nfs_server_clients": ["100.101.1.10/32", "100.101.1.11/32"],
            "nfs_server_export_options": ["rw", "sync", "no_subtree_check"],
            "nfs_server_root_squash": True,
            "nfs_server_ganesha_allow_io_flusher_fail": False,
            "nfs_server_idmap_domain": "meshctl.mesh",
        }
        text = env.get_template(name).render(**{**base, **variables})
        return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]

    return _render


def test_kernel_exports_one_entry_per_member(render):
    assert render("meshctl.exports.j2") == [
        "/mnt/shared-slurm 100.101.1.10/32(rw,sync,no_subtree_check,root_squash) "
        "100.101.1.11/32(rw,sync,no_subtree_check,root_squash)"
    ]


def test_no_root_squash_is_an_explicit_opt_in(render):
    (line,) = render("meshctl.exports.j2", nfs_server_root_squash=False)
    assert "no_root_squash" in line and ",root_squash" not in line


def test_ganesha_export(render):
    lines = render("ganesha.conf.j2", nfs_server_clients=["100.64.0.0/10"])
    assert "Graceless = true;" in lines
    assert "Path = /mnt/shared-slurm;" in lines
    assert "Squash = Root_Squash;" in lines
    assert "Access_Type = None;" in lines  # nobody but the CLIENT block
    assert "Clients = 100.64.0.0/10;" in lines
    assert "Access_Type = RW;" in lines
    assert "allow_set_io_flusher_fail = true;" not in lines


def test_ganesha_in_a_container_starts_without_cap_sys_resource(render):
    assert "allow_set_io_flusher_fail = true;" in render(
        "ganesha.conf.j2", nfs_server_ganesha_allow_io_flusher_fail=True
    )


def test_ganesha_and_every_client_share_one_id_mapping_domain(render):
    """NFSv4 names owners user@domain: the server's domain is the clients' /etc/idmapd.conf one
    (roles/nfs_client/templates/idmapd.conf.j2), or files show as nobody:nogroup."""
    assert "DomainName = meshctl.mesh;" in render("ganesha.conf.j2")
    client = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES.parents[1] / "nfs_client" / "templates")))
    client.filters["comment"] = comment
    text = client.get_template("idmapd.conf.j2").render(ansible_managed="x", nfs_client_idmap_domain="meshctl.mesh")
    assert "[General]" in text and "Domain = meshctl.mesh" in text.splitlines()
