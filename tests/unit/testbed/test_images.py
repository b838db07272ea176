import dataclasses

from meshctl.localmesh import images
from meshctl.localmesh.images import ImageSpec


def test_keys_are_stable_for_the_same_inputs():
    spec = ImageSpec("bookworm")
    assert images.base_key(spec) == images.base_key(ImageSpec("bookworm"))
    assert images.node_key(spec) == images.node_key(ImageSpec("bookworm"))


def test_suite_and_mirror_change_both_keys():
    a = ImageSpec("bookworm")
    for b in (ImageSpec("trixie"), ImageSpec("bookworm", mirror="http://mirror.example/debian")):
        assert images.base_key(a) != images.base_key(b)
        assert images.node_key(a) != images.node_key(b)


def test_extra_ca_changes_only_the_node_layer():
    a = ImageSpec("bookworm")
    b = dataclasses.replace(a, extra_ca_sha256="ab" * 32)
    assert images.base_key(a) == images.base_key(b)
    assert images.node_key(a) != images.node_key(b)


def test_layer_script_change_changes_the_node_key(monkeypatch):
    spec = ImageSpec("bookworm")
    before = images.node_key(spec)
    monkeypatch.setattr(images, "LAYER_SCRIPT", images.LAYER_SCRIPT + "\ntrue\n")
    assert images.node_key(spec) != before
    assert images.base_key(spec) == images.base_key(ImageSpec("bookworm"))


def test_build_is_skipped_only_when_the_label_matches():
    assert images.needs_build(None, "k1")
    assert images.needs_build("k0", "k1")
    assert not images.needs_build("k1", "k1")


def test_extra_ca_selection(tmp_path):
    bundle = tmp_path / "ca.crt"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    assert images.extra_ca_path({"MESHCTL_EXTRA_CA": str(bundle)}) == bundle
    assert images.extra_ca_path({"MESHCTL_EXTRA_CA": "none"}) is None
    assert images.extra_ca_path({"MESHCTL_EXTRA_CA": str(tmp_path / "missing")}) is None


def test_spec_hashes_the_ca_content(tmp_path):
    bundle = tmp_path / "ca.crt"
    bundle.write_text("one")
    first = images.spec_for("bookworm", {"MESHCTL_EXTRA_CA": str(bundle)})
    bundle.write_text("two")
    second = images.spec_for("bookworm", {"MESHCTL_EXTRA_CA": str(bundle)})
    assert first.extra_ca_sha256 != second.extra_ca_sha256
    assert images.node_key(first) != images.node_key(second)
