"""Settings read from the environment once: the store location, and secrets kept out of text."""

from __future__ import annotations

from pathlib import Path

from domainbench.runtime.settings import Settings, redact_uri


def test_from_env_reads_the_store_location() -> None:
    s = Settings.from_env({"DOMAINBENCH_HOME": "/data/db", "DOMAINBENCH_MONGO_URI": "mongodb://db:27017/x"})
    assert s.home == Path("/data/db") and s.store_uri == "mongodb://db:27017/x"
    default = Settings.from_env({})
    assert default.home == Path(".domainbench") and default.store_uri is None
    assert Settings.from_env({"DOMAINBENCH_MONGO_URI": ""}).store_uri is None  # set but empty: not set


def test_repr_and_str_never_show_the_password() -> None:
    s = Settings.from_env({"DOMAINBENCH_MONGO_URI": "mongodb://alice:s3cr3t@db:27017/x", "OPENAI_API_KEY": "sk-live-123"})
    for text in (repr(s), str(s), f"{s}"):
        assert "s3cr3t" not in text and "sk-live-123" not in text
        assert "mongodb://alice:***@db:27017/x" in text


def test_redact_scrubs_every_known_secret() -> None:
    s = Settings.from_env({"DOMAINBENCH_MONGO_URI": "mongodb://bob:p%40ss@db/x", "DOMAINBENCH_LLM_API_KEY": "key-abc"})
    text = s.redact("uri mongodb://bob:p%40ss@db/x, password p@ss, raw p%40ss, key key-abc")
    assert "p@ss" not in text and "p%40ss" not in text and "key-abc" not in text
    assert "mongodb://bob:***@db/x" in text
    assert Settings.from_env({}).redact("nothing to hide") == "nothing to hide"


def test_redact_uri() -> None:
    assert redact_uri("mongodb://alice:s3cr3t@db:27017/x") == "mongodb://alice:***@db:27017/x"
    assert redact_uri("mongodb://db:27017/x") == "mongodb://db:27017/x"


def test_planner_variables_are_read_once_and_never_shown() -> None:
    from domainbench.planner.settings import settings_from_env

    env = {"DOMAINBENCH_LLM_BASE_URL": "http://127.0.0.1:9/v1", "DOMAINBENCH_LLM_API_KEY": "sk-hush", "HOME": "/root"}
    s = Settings.from_env(env)
    env["DOMAINBENCH_LLM_BASE_URL"] = "http://changed/v1"  # later changes are not seen
    assert s.llm_environ() == {"DOMAINBENCH_LLM_API_KEY": "sk-hush", "DOMAINBENCH_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    llm = settings_from_env(s.llm_environ())
    assert str(llm.base_url).startswith("http://127.0.0.1:9/v1") and llm.key_value() == "sk-hush"
    assert "sk-hush" not in repr(s) and "sk-hush" not in str(s)
