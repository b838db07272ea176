"""Module mesh_account_files' and mesh_mlflow_accounts' plain functions
(plugins/module_utils/mesh_accounts.py), on folders of this machine (run as root in CI and here:
the owner checks need it) and on the decisions for the server's answers."""

import base64
import json
import os
import pwd
import stat

import pytest

from meshctl import resources

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="gives files to another user: needs root")
HOLDER = "nobody"


@pytest.fixture
def mod():
    return resources.plugin("module_utils.mesh_accounts")


def uid(name=HOLDER):
    return pwd.getpwnam(name).pw_uid


def plant(path, text, owner, mode):
    """A file of root's making elsewhere: what a holder could point or link their file to."""
    path.write_text(text)
    os.chown(path, owner, 0)
    os.chmod(path, mode)
    return path


def facts(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, oct(stat.S_IMODE(st.st_mode))


@needs_root
def test_first_run_makes_the_folders_and_files_with_owners_and_modes_then_changes_nothing(mod, tmp_path):
    top = tmp_path / "users"
    files = {HOLDER: "U=nobody\nP=secret\n", "root": "U=root\nP=other\n"}
    first = mod.ensure_account_files(str(top), "mlflow.env", files, [], check=False)
    assert first["changed"] and first["written"] == ["nobody", "root"] and first["folders"] == ["nobody", "root"]
    assert facts(top) == (0, 0, "0o755")
    assert facts(top / HOLDER) == (uid(), 0, "0o700")
    assert facts(top / HOLDER / "mlflow.env") == (uid(), 0, "0o400")
    assert (top / HOLDER / "mlflow.env").read_text() == files[HOLDER]
    assert sorted(os.listdir(top / HOLDER)) == ["mlflow.env"]  # no temporary file left
    again = mod.ensure_account_files(str(top), "mlflow.env", files, [], check=False)
    assert again == {"top": False, "folders": [], "written": [], "removed": [], "changed": False}


@needs_root
def test_a_new_password_rewrites_only_that_holders_file(mod, tmp_path):
    top = tmp_path / "users"
    mod.ensure_account_files(str(top), "f", {HOLDER: "old\n", "root": "r\n"}, [], check=False)
    result = mod.ensure_account_files(str(top), "f", {HOLDER: "new\n", "root": "r\n"}, [], check=False)
    assert result["written"] == [HOLDER] and result["folders"] == []
    assert (top / HOLDER / "f").read_text() == "new\n"


@needs_root
def test_check_mode_says_what_it_would_do_and_changes_nothing(mod, tmp_path):
    top = tmp_path / "users"
    result = mod.ensure_account_files(str(top), "f", {HOLDER: "x\n"}, [], check=True)
    assert result["changed"] and result["written"] == [HOLDER]
    assert not top.exists()
    mod.ensure_account_files(str(top), "f", {HOLDER: "x\n"}, [], check=False)
    os.chmod(top / HOLDER / "f", 0o444)
    result = mod.ensure_account_files(str(top), "f", {HOLDER: "x\n"}, [], check=True)
    assert result["written"] == [HOLDER]
    assert facts(top / HOLDER / "f")[2] == "0o444"  # left as it was


def test_check_mode_counts_a_user_the_run_would_create_first(mod, tmp_path):
    result = mod.ensure_account_files(str(tmp_path / "u"), "f", {"meshctl-no-such-user": "x"}, [], check=True)
    assert result["written"] == ["meshctl-no-such-user"]
    with pytest.raises(mod.AccountsError, match="no user meshctl-no-such-user"):
        mod.ensure_account_files(str(tmp_path / "u"), "f", {"meshctl-no-such-user": "x"}, [], check=False)


@needs_root
def test_a_link_the_holder_lays_is_replaced_never_followed(mod, tmp_path):
    top = tmp_path / "users"
    mod.ensure_account_files(str(top), "f", {HOLDER: "old\n"}, [], check=False)
    victim = plant(tmp_path / "shadow", "root's\n", 0, 0o600)
    os.unlink(top / HOLDER / "f")
    os.symlink(victim, top / HOLDER / "f")  # what the holder may do in their own folder
    result = mod.ensure_account_files(str(top), "f", {HOLDER: "new\n"}, [], check=False)
    assert result["written"] == [HOLDER]
    assert victim.read_text() == "root's\n" and facts(victim) == (0, 0, "0o600")  # untouched
    assert not (top / HOLDER / "f").is_symlink() and (top / HOLDER / "f").read_text() == "new\n"


@needs_root
def test_a_hard_link_or_a_pipe_the_holder_lays_is_replaced_not_given_away(mod, tmp_path):
    top = tmp_path / "users"
    mod.ensure_account_files(str(top), "f", {HOLDER: "same\n"}, [], check=False)
    other = plant(tmp_path / "roots-file", "same\n", uid(), 0o400)
    os.unlink(top / HOLDER / "f")
    os.link(other, top / HOLDER / "f")  # same content, owner and mode, but another file's name too
    assert mod.ensure_account_files(str(top), "f", {HOLDER: "same\n"}, [], check=False)["written"] == [HOLDER]
    assert os.stat(top / HOLDER / "f").st_ino != os.stat(other).st_ino
    os.unlink(top / HOLDER / "f")
    os.mkfifo(top / HOLDER / "f")  # opening it to read must not wait for a writer
    assert mod.ensure_account_files(str(top), "f", {HOLDER: "same\n"}, [], check=False)["written"] == [HOLDER]
    assert stat.S_ISREG(os.lstat(top / HOLDER / "f").st_mode)


@needs_root
def test_a_folder_with_wrong_owner_or_mode_is_put_right(mod, tmp_path):
    top = tmp_path / "users"
    mod.ensure_account_files(str(top), "f", {HOLDER: "x\n"}, [], check=False)
    os.chmod(top / HOLDER, 0o755)
    os.chmod(top, 0o777)
    result = mod.ensure_account_files(str(top), "f", {HOLDER: "x\n"}, [], check=False)
    assert result["top"] and result["folders"] == [HOLDER] and result["written"] == []
    assert facts(top) == (0, 0, "0o755") and facts(top / HOLDER) == (uid(), 0, "0o700")


def test_a_link_in_place_of_a_folder_is_refused(mod, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "users")
    with pytest.raises(mod.AccountsError, match="is not a folder"):
        mod.ensure_account_files(str(tmp_path / "users"), "f", {"root": "x"}, [], check=False)
    (tmp_path / "top").mkdir(mode=0o755)
    os.symlink(tmp_path / "elsewhere", tmp_path / "top" / "root")
    with pytest.raises(mod.AccountsError, match="root's account folder is not a folder"):
        mod.ensure_account_files(str(tmp_path / "top"), "f", {"root": "x"}, [], check=True)


def test_names_that_are_no_plain_names_are_refused(mod, tmp_path):
    for files, filename in (({"../etc": "x"}, "f"), ({"root": "x"}, "../f"), ({"root": "x"}, "")):
        with pytest.raises(mod.AccountsError):
            mod.ensure_account_files(str(tmp_path), filename, files, [], check=True)


def test_old_files_are_removed_links_too_but_never_a_folder(mod, tmp_path):
    old, link, gone = tmp_path / "mlflow.env", tmp_path / "link", tmp_path / "gone"
    old.write_text("admin\n")
    target = tmp_path / "target"
    target.write_text("keep\n")
    os.symlink(target, link)
    assert mod.ensure_account_files(str(tmp_path / "u"), "f", {}, [str(old), str(link), str(gone)], check=True)[
        "removed"
    ] == [str(old), str(link)]
    assert old.exists()  # check mode
    result = mod.ensure_account_files(str(tmp_path / "u"), "f", {}, [str(old), str(link), str(gone)], check=False)
    assert result["changed"] and result["removed"] == [str(old), str(link)]
    assert not old.exists() and not os.path.lexists(link) and target.read_text() == "keep\n"
    assert not (tmp_path / "u").exists()  # no account files: no folder either
    with pytest.raises(mod.AccountsError, match="is a folder"):
        mod.ensure_account_files(str(tmp_path / "u"), "f", {}, [str(tmp_path)], check=False)


def test_basic_auth_and_account_body(mod):
    header = mod.basic_auth("alice", "p:w")
    assert base64.b64decode(header.split()[1]).decode() == "alice:p:w" and header.startswith("Basic ")
    assert json.loads(mod.account_body("alice", "pw")) == {"username": "alice", "password": "pw"}


class Server:
    """The answers of MLflow's basic-auth app, as its API document gives them: a request as an
    account gets 200 with its password and 401 otherwise; users/create 200, or 400 when the name
    exists; users/update-password 200."""

    def __init__(self, users):
        self.users = dict(users)
        self.calls = []

    def ask(self, name, password):
        self.calls.append(("ask", name))
        return 200 if self.users.get(name) == password else 401

    def create(self, name, password):
        self.calls.append(("create", name))
        if name in self.users:
            return 400
        self.users[name] = password
        return 200

    def update(self, name, password):
        self.calls.append(("update", name))
        self.users[name] = password
        return 200

    def delete(self, name):
        """users/delete: 200, or 404 when there is no such user (mlflow/server/auth, 3.17)."""
        self.calls.append(("delete", name))
        return 200 if self.users.pop(name, None) is not None else 404


def test_the_server_gets_each_missing_account_and_each_wrong_password_set(mod):
    server = Server({"root": "r", "alice": "squatter", "mesh": "admin"})
    wanted = {"root": "r", "alice": "a", "bob": "b"}
    result = mod.reconcile(wanted, server.ask, server.create, server.update, check=False)
    assert result == {"taken": ["root"], "created": ["bob"], "updated": ["alice"], "missing": [], "changed": True}
    assert server.users == {"root": "r", "alice": "a", "bob": "b", "mesh": "admin"}
    server.calls.clear()
    again = mod.reconcile(wanted, server.ask, server.create, server.update, check=False)
    assert not again["changed"] and again["taken"] == ["alice", "bob", "root"]
    assert server.calls == [("ask", "alice"), ("ask", "bob"), ("ask", "root")]  # one request each, no more


def test_check_mode_only_asks(mod):
    server = Server({"root": "r"})
    result = mod.reconcile({"root": "r", "bob": "b"}, server.ask, server.create, server.update, check=True)
    assert result["missing"] == ["bob"] and result["changed"]
    assert server.users == {"root": "r"} and ("create", "bob") not in server.calls


@pytest.mark.parametrize(
    ("ask", "create", "update", "said"),
    [
        (500, 200, 200, "answered 500 to a request as bob"),
        (401, 403, 200, "answered 403 when the admin account created bob"),
        (401, 400, 401, "answered 401 when the admin account set bob's password"),
        (401, 400, 404, r"refused to create bob \(400\) and holds no such account"),
    ],
)
def test_unexpected_answers_stop_with_what_the_server_said(mod, ask, create, update, said):
    with pytest.raises(mod.AccountsError, match=said) as caught:
        mod.reconcile({"bob": "pw-secret"}, lambda *_: ask, lambda *_: create, lambda *_: update, check=False)
    assert "pw-secret" not in str(caught.value)


def test_the_key_changes_with_the_accounts_or_any_write_of_the_store(mod, tmp_path):
    db = tmp_path / "basic_auth.db"
    assert mod.checked_key({"root": "r"}, str(db)) is None  # no store: nothing to keep
    db.write_bytes(b"x" * 10)
    first = mod.checked_key({"root": "r"}, str(db))
    assert first == mod.checked_key({"root": "r"}, str(db))
    digest = first.split()[0]
    assert len(digest) == 64 and set(digest) <= set("0123456789abcdef")  # a hash, never the password
    assert mod.checked_key({"root": "r2"}, str(db)) != first  # a new password
    assert mod.checked_key({"root": "r", "bob": "b"}, str(db)) != first  # a new account
    os.utime(db, ns=(1, 1))
    assert mod.checked_key({"root": "r"}, str(db)) != first  # the store written
    before_wal = mod.checked_key({"root": "r"}, str(db))
    (tmp_path / "basic_auth.db-wal").write_bytes(b"w")
    assert mod.checked_key({"root": "r"}, str(db)) != before_wal  # a write in WAL mode


def test_the_stamp_is_roots_alone_and_never_read_through_a_link(mod, tmp_path):
    stamp = tmp_path / "meshctl" / "checked"
    mod.write_stamp(str(stamp), "key 1")
    assert mod.read_stamp(str(stamp)) == "key 1"
    assert oct(stat.S_IMODE(os.stat(stamp).st_mode)) == "0o600"
    assert oct(stat.S_IMODE(os.stat(stamp.parent).st_mode)) == "0o700"
    mod.write_stamp(str(stamp), "key 2")  # renamed over the old one
    assert mod.read_stamp(str(stamp)) == "key 2" and os.listdir(stamp.parent) == ["checked"]
    other = tmp_path / "other"
    other.write_text("key 2\n")
    os.unlink(stamp)
    os.symlink(other, stamp)
    assert mod.read_stamp(str(stamp)) is None  # a link is not the stamp
    os.unlink(stamp)
    stamp.write_text("key 2\n")
    os.chmod(stamp, 0o666)
    assert mod.read_stamp(str(stamp)) is None  # others may write it: not trusted
    os.chmod(stamp.parent, 0o777)
    with pytest.raises(mod.AccountsError, match="only root may write"):
        mod.write_stamp(str(stamp), "key 3")


def test_what_is_kept_is_a_pass_that_changed_nothing_with_the_store_still(mod):
    server = Server({"root": "r"})
    keys = iter(["k0", "k1", "k1"])  # the store changes once: this call's own creation of bob
    result, keep = mod.reconcile_once({"root": "r", "bob": "b"}, server.ask, server.create, server.update,
                                      check=False, key=lambda: next(keys))  # fmt: skip
    assert result["created"] == ["bob"] and keep == "k1"
    assert server.calls.count(("ask", "bob")) == 2  # asked again after creating
    keys = iter(["k1", "k2"])  # someone wrote the store while the accounts were asked
    _, keep = mod.reconcile_once({"root": "r", "bob": "b"}, server.ask, server.create, server.update,
                                 check=False, key=lambda: next(keys))  # fmt: skip
    assert keep is None
    _, keep = mod.reconcile_once({"root": "r"}, server.ask, server.create, server.update, check=True, key=lambda: "k")
    assert keep is None  # a dry run keeps nothing


def test_only_accounts_meshctl_gave_out_and_no_longer_holds_are_deleted(mod):
    server = Server({"root": "r", "alice": "a", "bob": "b", "outsider": "o", "mesh": "admin"})
    given = ["alice", "bob", "root", "mesh"]  # the admin's name, were it ever listed, is never deleted
    retired = mod.retire(given, {"root": "r", "alice": "a"}, "mesh", server.delete, check=False)
    assert retired == ["bob"]
    assert set(server.users) == {"root", "alice", "outsider", "mesh"}  # nobody else's account
    assert server.calls == [("delete", "bob")]
    # Already gone (deleted by hand): nothing to say, no error; check mode deletes nothing.
    assert mod.retire(["bob"], {}, "mesh", server.delete, check=False) == []
    server.calls.clear()
    assert mod.retire(["alice"], {}, "mesh", server.delete, check=True) == ["alice"]
    assert server.calls == [] and "alice" in server.users


def test_a_refused_delete_stops_with_what_the_server_said(mod):
    with pytest.raises(mod.AccountsError, match="answered 403 when the admin account deleted bob"):
        mod.retire(["bob"], {}, "mesh", lambda _name: 403, check=False)
    assert json.loads(mod.names_body("bob")) == {"username": "bob"}


@needs_root
def test_the_list_of_accounts_given_out_is_roots_alone(mod, tmp_path):
    folder = tmp_path / "meshctl"
    path = str(folder / "given")
    assert mod.read_given(path) == []
    mod.write_given(path, ["root", "alice"])
    assert mod.read_given(path) == ["alice", "root"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o666)  # others may write it: not believed (nothing is deleted on its word)
    assert mod.read_given(path) == []
