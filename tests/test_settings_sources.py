"""One reader of DOMAINBENCH_* settings: the environment over the settings file over the defaults."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from domainbench.errors import UserInputError
from domainbench.runtime.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def _file(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return {"DOMAINBENCH_SETTINGS": str(path)}


def _domainbench_names(trees: dict[Path, ast.Module]) -> set[str]:
    """Module constants naming a DOMAINBENCH_* variable (``ENV_HOME = "DOMAINBENCH_HOME"``)."""
    return {t.id for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and str(node.value.value).startswith("DOMAINBENCH_")
            for t in node.targets if isinstance(t, ast.Name)}


def test_no_module_but_settings_reads_a_domainbench_variable() -> None:
    """``os.environ`` is read for DOMAINBENCH_* names only by ``domainbench.runtime.settings``; elsewhere it is written
    (setdefault of third-party switches), handed on to a child process, or read for a name the user chose
    (a VLM endpoint's key variable).

    corruptions/ is a leaf library below the settings (it imports nothing of domainbench) and is not checked.
    """
    trees = {path: ast.parse(path.read_text()) for folder in ("backend", "frontend", "prompts")
             for path in (ROOT / folder).rglob("*.py") if path != ROOT / "backend" / "runtime" / "settings.py"}
    constants = _domainbench_names(trees)

    def names_a_domainbench_variable(arg: ast.AST) -> bool:
        if isinstance(arg, ast.Constant):
            return str(arg.value).startswith("DOMAINBENCH_")
        return (isinstance(arg, ast.Name) and arg.id in constants) or (isinstance(arg, ast.Attribute) and arg.attr in constants)

    readers = []
    for path, tree in trees.items():
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "envvar":
                readers.append(f"{path.relative_to(ROOT)}:{node.value.lineno} (typer envvar)")
            if not (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
                    and isinstance(node.value, ast.Name) and node.value.id == "os"):
                continue
            parent = parents.get(node)
            if isinstance(parent, ast.Call):  # os.getenv(NAME)
                args = parent.args[:1]
            elif isinstance(parent, ast.Subscript):  # os.environ[NAME]
                args = [parent.slice]
            elif isinstance(parent, ast.Attribute) and parent.attr in ("get", "pop"):  # os.environ.get(NAME)
                call = parents.get(parent)
                args = call.args[:1] if isinstance(call, ast.Call) else []
            else:
                args = []
            if any(names_a_domainbench_variable(a) for a in args):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []


def test_the_environment_beats_the_file_which_beats_the_defaults(tmp_path: Path) -> None:
    env = _file(tmp_path, 'home = "/data/db"\nexecutor = "ray"\nray_address = "head:6379"\n'
                          '[llm]\nmodel = "llama3"\ntimeout = 7\njson_mode = false\n')
    s = Settings.from_env({**env, "DOMAINBENCH_HOME": "/env/db", "DOMAINBENCH_LLM_MODEL": "from-env"})
    assert s.home == Path("/env/db")
    opts = s.executor_options()
    assert (opts.kind, opts.address) == ("ray", "head:6379")
    llm = s.llm_settings()
    assert (llm.model, llm.timeout, llm.json_mode, llm.concurrency) == ("from-env", 7.0, False, 4)
    assert Settings.from_env(env).home == Path("/data/db")
    assert Settings.from_env({}).executor_options().kind == "local"


def test_secrets_from_the_file_are_redacted(tmp_path: Path) -> None:
    env = _file(tmp_path, 'mongo_uri = "mongodb://alice:filepw@db:27017/x"\n[llm]\napi_key = "sk-from-file"\n')
    s = Settings.from_env(env)
    assert s.store_uri == "mongodb://alice:filepw@db:27017/x"
    assert s.llm_settings().key_value() == "sk-from-file"
    for text in (repr(s), str(s)):
        assert "filepw" not in text and "sk-from-file" not in text
    assert s.redact("uri mongodb://alice:filepw@db:27017/x key sk-from-file") == "uri mongodb://alice:***@db:27017/x key ***"


@pytest.mark.parametrize(("text", "message"), [
    ('colour = "blue"\n', r"setting 'colour' in DOMAINBENCH_SETTINGS=.*settings.toml: Extra inputs"),
    ('home = [\n', r"DOMAINBENCH_SETTINGS=.*settings.toml: not valid TOML"),
])
def test_a_bad_settings_file_is_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UserInputError, match=message):
        Settings.from_env(_file(tmp_path, text))


def test_a_missing_settings_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="DOMAINBENCH_SETTINGS=.*nope.toml: no such settings file"):
        Settings.from_env({"DOMAINBENCH_SETTINGS": str(tmp_path / "nope.toml")})


def test_bad_planner_values_fail_only_when_planning(tmp_path: Path) -> None:
    s = Settings.from_env({"DOMAINBENCH_LLM_TIMEOUT": "-1", "DOMAINBENCH_LLM_UNRELATED": "x"})
    assert s.home == Path(".domainbench")  # every other command still works
    with pytest.raises(UserInputError, match="planner setting 'timeout' is invalid"):
        s.llm_settings()
    with pytest.raises(UserInputError, match=r"planner setting\(s\) DOMAINBENCH_LLM_TEMP\b"):
        Settings.from_env(_file(tmp_path, "[llm]\ntemp = 1\n")).llm_settings()


def test_the_cli_takes_the_executor_from_the_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`domainbench run` without --executor uses the file's executor: ray with a bad address is refused before
    anything is opened, naming the flag (the same check as for --address)."""
    from typer.testing import CliRunner

    from domainbench.app.cli import app

    for k, v in _file(tmp_path, 'executor = "ray"\nray_address = "nowhere"\n').items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(app, ["run", "--resume", "x"])
    assert out.exit_code != 0 and "Ray address 'nowhere' is not understood" in str(out.exception or out.output)
    assert not (tmp_path / "home").exists()
