"""cluster.seal and cluster.access without a broker: what a sealed value opens to, and every way
it refuses to (another key, another name, altered, not sealed, sealed for a keyless process),
the key file and `yomite cluster-key`, the config's access keys, and which URLs are loopback."""

from pathlib import Path

import pytest

from cluster.access import AccessError, BusAccess, on_loopback, redacted
from cluster.seal import MAGIC, Sealer, SealError, write_key_file
from hall.clusterconfig import ClusterConfig
from yomite.cli import main


def sealer(tmp: Path, name: str = "k") -> tuple[Sealer, Path]:
    path = tmp / name
    write_key_file(path)
    return Sealer.load(path), path


def test_a_sealed_value_opens_under_its_own_name_with_the_clusters_key_only(
        tmp_path: Path) -> None:
    s, path = sealer(tmp_path)
    box = s.seal("yomite_shared/pin.main", b"123456")
    assert box.startswith(MAGIC) and b"123456" not in box
    assert s.open("yomite_shared/pin.main", box) == b"123456"
    assert s.seal("yomite_shared/pin.main", b"123456") != box  # a fresh nonce each time
    with pytest.raises(SealError, match="altered, or sealed for another name"):
        s.open("yomite_shared/pin.other", box)  # moved to another key
    altered = box[:-1] + bytes([box[-1] ^ 1])
    with pytest.raises(SealError, match=str(path)):
        s.open("yomite_shared/pin.main", altered)
    other, _ = sealer(tmp_path, "other")
    with pytest.raises(SealError, match=f"sealed with another key .*{path.name}"):
        Sealer.load(tmp_path / "other").open("yomite_shared/pin.main", box)
    with pytest.raises(SealError, match="not sealed"):
        s.open("yomite_shared/pin.main", b"000000")  # put by someone without the key
    assert other.key_id != s.key_id


def test_without_a_key_values_travel_as_they_are_and_a_sealed_one_is_refused(
        tmp_path: Path) -> None:
    plain = Sealer.plain()
    assert not plain.sealing
    assert plain.seal("x", b"abc") == b"abc" and plain.open("x", b"abc") == b"abc"
    s, _ = sealer(tmp_path)
    with pytest.raises(SealError, match=r"cluster\.secret_key_file"):
        plain.open("x", s.seal("x", b"abc"))


def test_a_key_file_keeps_older_keys_for_opening_and_refuses_what_is_not_a_key(
        tmp_path: Path) -> None:
    old, old_path = sealer(tmp_path, "old")
    new, new_path = sealer(tmp_path, "new")
    both = tmp_path / "both"
    both.write_text(new_path.read_text() + old_path.read_text())
    rotated = Sealer.load(both)
    assert rotated.key_id == new.key_id  # the first key seals
    assert rotated.open("w", old.seal("w", b"v")) == b"v"  # an older one still opens
    for text, why in (("", "no key"), ("abcd\n", "line 1: not a key"),
                      ("zz" * 32 + "\n", "line 1: not a key")):
        bad = tmp_path / "bad"
        bad.write_text(text)
        with pytest.raises(SealError, match=why):
            Sealer.load(bad)
    with pytest.raises(SealError, match="cannot be read"):
        Sealer.load(tmp_path / "missing")


def test_cluster_key_makes_a_private_key_file_and_never_replaces_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.key"
    assert main(["cluster-key", str(path)]) == 0
    assert path.stat().st_mode & 0o077 == 0
    before = path.read_text()
    Sealer.load(path)
    assert main(["cluster-key", str(path)]) == 2
    assert "not replaced" in capsys.readouterr().err
    assert path.read_text() == before


def test_access_without_a_key_is_refused_unless_insecure_and_files_are_named(
        tmp_path: Path) -> None:
    with pytest.raises(AccessError, match=r"cluster\.secret_key_file is not set.*cluster-key"):
        BusAccess.of(ClusterConfig(bus="nats://10.0.0.5:4222"))
    assert not BusAccess.of(ClusterConfig(insecure=True)).seal.sealing
    _, key = sealer(tmp_path)
    with pytest.raises(AccessError, match=r"cluster\.password_file .*missing"):
        BusAccess.of(ClusterConfig(user="yomite", password_file=tmp_path / "missing",
                                   secret_key_file=key))
    with pytest.raises(AccessError, match=r"cluster\.nkey .*no such file"):
        BusAccess.of(ClusterConfig(nkey=tmp_path / "seed", secret_key_file=key))
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    access = BusAccess.of(ClusterConfig(user="yomite", password_file=pw, secret_key_file=key))
    assert access.options() == {"user": "yomite", "password": "s3cret"}
    assert "s3cret" not in repr(access)
    with pytest.raises(ValueError, match="one way to sign in"):
        ClusterConfig(user="yomite", password_file=pw, nkey=pw)
    with pytest.raises(ValueError, match="tls_cert and tls_key"):
        ClusterConfig(tls_cert=pw)


def test_which_brokers_are_on_loopback_and_passwords_stay_out_of_messages() -> None:
    assert on_loopback("nats://127.0.0.1:4222")
    assert on_loopback("nats://localhost:4222,nats://[::1]:4223")
    assert not on_loopback("nats://127.0.0.1:4222,nats://10.0.0.5:4222")
    assert not on_loopback("tls://broker.example.lan:4222")
    assert redacted("nats://yomite:pw@10.0.0.5:4222") == "nats://yomite:***@10.0.0.5:4222"
