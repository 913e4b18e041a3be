"""A store that cannot be opened is one user error naming the variable and the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from domainbench.errors import StoreUnavailableError, UserInputError
from domainbench.store import open_store
from domainbench.store.sqlite_store import SQLiteStore


def _open_error(home: Path) -> str:
    with pytest.raises(StoreUnavailableError) as e:
        open_store(home=home)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"DOMAINBENCH_HOME={home}: "), text
    return text


def test_home_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("not a directory")
    text = _open_error(tmp_path / "f")
    assert f"{tmp_path / 'f'} is a file, not a directory" in text and str(tmp_path / "f" / "domainbench.sqlite") in text


def test_home_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("not a directory")
    assert f"{tmp_path / 'f'} is a file, not a directory" in _open_error(tmp_path / "f" / "sub")


def test_home_holding_a_corrupt_database(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "domainbench.sqlite").write_bytes(b"garbage, not sqlite " * 300)
    text = _open_error(tmp_path / "h")
    assert "damaged or not a SQLite database" in text and str(tmp_path / "h" / "domainbench.sqlite") in text


def test_directory_where_the_database_file_should_be(tmp_path: Path) -> None:
    (tmp_path / "h" / "domainbench.sqlite").mkdir(parents=True)
    assert "it is a directory, not a file" in _open_error(tmp_path / "h")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_unwritable_home(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert "not writable" in _open_error(ro)
    finally:
        ro.chmod(0o700)


def test_sqlite_store_itself_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreUnavailableError, match=f"cannot open the embedded store {tmp_path / 'f' / 'db.sqlite'}"):
        SQLiteStore(tmp_path / "f" / "db.sqlite")


def test_bad_sqlite_uri_names_the_uri_variable(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreUnavailableError, match="^DOMAINBENCH_MONGO_URI=sqlite:///.*is a file, not a directory"):
        open_store(f"sqlite:///{tmp_path / 'f' / 'x.sqlite'}")


@pytest.mark.parametrize("uri", ["mongodb://carol:hunter2@db:notaport/x", "mongodb://carol:hunter2@@db/x"])
def test_malformed_mongo_uri_is_a_user_error_without_the_password(uri: str) -> None:
    with pytest.raises(UserInputError) as e:
        open_store(uri)
    text = str(e.value)
    assert text.startswith("DOMAINBENCH_MONGO_URI=mongodb://carol:***@") and "not a valid MongoDB URI" in text
    assert "hunter2" not in text


def test_env_is_read_only_without_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "from-env"))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    assert open_store().path == tmp_path / "from-env" / "domainbench.sqlite"  # type: ignore[attr-defined]
    assert open_store(home=tmp_path / "given").path == tmp_path / "given" / "domainbench.sqlite"  # type: ignore[attr-defined]
