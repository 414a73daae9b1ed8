"""The JOBCONSOLE settings: defaults, environment variables, explicit settings, and the system check."""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, get_type_hints

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from jobconsole import conf
from jobconsole.core.maintenance import Retention


@pytest.fixture
def jc(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """settings.JOBCONSOLE starting empty, no Jobconsole variable in the environment, the cache cleared."""
    for setting in conf.SETTINGS:
        if setting.env:
            monkeypatch.delenv(setting.env, raising=False)
    settings.JOBCONSOLE = {}
    conf.get_config.cache_clear()
    yield settings
    conf.get_config.cache_clear()


def fresh() -> conf.Config:
    conf.get_config.cache_clear()
    return conf.get_config()


def test_explicit_setting_beats_environment_beats_default(jc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fresh()["WORKER_CONCURRENCY"] == 10
    monkeypatch.setenv("WORKER_CONCURRENCY", "7")
    assert fresh()["WORKER_CONCURRENCY"] == 7
    jc.JOBCONSOLE = {"WORKER_CONCURRENCY": 3}  # setting_changed clears the cache by itself
    assert conf.get_config()["WORKER_CONCURRENCY"] == 3


def test_groups_merge_key_by_key(jc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBCONSOLE_MIRROR_LOCK_TTL", "0.5")
    monkeypatch.setenv("JOBCONSOLE_MIRROR_IN_WORKER", "off")
    monkeypatch.setenv("JOBCONSOLE_TASK_MODULES", "a.tasks, b.tasks,")
    jc.JOBCONSOLE = {"MIRROR": {"BATCH": 5}, "RETENTION": {"failed": 60}, "DB_RETENTION": {"audit": 3600}}
    config = fresh()
    assert config["MIRROR"] == {
        "IN_WORKER": False, "BATCH": 5, "BLOCK_MS": 100, "SETTLE_MS": 10, "PACE_MS": 50, "LOCK_TTL": 0.5,
        "RETENTION_EVERY": 300.0, "RELAY_EVERY": 2.0, "RESTORE": True,
    }  # fmt: skip
    assert config["TASK_MODULES"] == ["a.tasks", "b.tasks"]
    assert conf.retention() == Retention(failed=60.0)
    assert conf.db_retention()["audit"] == timedelta(hours=1)
    assert conf.db_retention()["dead"] == timedelta(days=90)
    assert conf.outbox_config() == {"RELAY_AFTER": 5.0, "KEEP_PUBLISHED": 7 * 86_400.0}


def test_redis_retention_defaults_are_the_engines(jc: Any) -> None:
    assert fresh()["RETENTION"] == Retention().as_dict()
    assert conf.retention() == Retention()


def test_the_table_and_the_typed_config_agree(jc: Any) -> None:
    config = fresh()
    assert set(config) == set(get_type_hints(conf.Config))
    assert set(config["MIRROR"]) == set(get_type_hints(conf.MirrorConfig))
    assert set(config["OUTBOX"]) == set(get_type_hints(conf.OutboxConfig))
    for setting in conf.SETTINGS:
        group, _, key = setting.name.rpartition(".")
        value = config[group][key] if group else config[key]  # type: ignore[literal-required]
        assert conf._is_kind(value, setting.type), setting.name


def errors() -> list[tuple[str, str]]:
    return [(e.id or "", e.msg) for e in run_checks(tags=["jobconsole"]) if (e.id or "").startswith("jobconsole.")]


def test_check_rejects_unknown_keys_and_wrong_types(jc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert errors() == []
    jc.JOBCONSOLE = {
        "REDIS_ULR": "redis://x", "MIRROR": {"BACTH": 5, "LOCK_TTL": "10"}, "WORKER_CONCURRENCY": 2.5,
        "TASK_MODULES": "app.tasks", "STRICT_ENQUEUE": 1, "OUTBOX": 7,
    }  # fmt: skip
    found = errors()
    assert sorted(code for code, _ in found) == ["jobconsole.E002"] * 2 + ["jobconsole.E003"] * 5
    text = "\n".join(message for _, message in found)
    for expected in (
        'JOBCONSOLE["REDIS_ULR"]', 'JOBCONSOLE["MIRROR"]["BACTH"]', '["MIRROR"]["LOCK_TTL"] must be a number',
        '["WORKER_CONCURRENCY"] must be an int', '["TASK_MODULES"] must be a list of strings',
        '["STRICT_ENQUEUE"] must be a bool', 'JOBCONSOLE["OUTBOX"] must be a dict',
    ):  # fmt: skip
        assert expected in text
    with pytest.raises(ImproperlyConfigured, match="REDIS_ULR"):
        fresh()
    with pytest.raises(SystemCheckError, match=r"jobconsole\.E002"):
        call_command("check", "--tag", "jobconsole")


def test_check_hints_at_the_known_keys(jc: Any) -> None:
    jc.JOBCONSOLE = {"MIRROR": {"BACTH": 5}}
    (error,) = run_checks(tags=["jobconsole"])
    assert "BATCH" in (error.hint or "") and "REDIS_URL" not in (error.hint or "")


def test_check_rejects_a_non_dict_and_unreadable_environment(jc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    jc.JOBCONSOLE = ["REDIS_URL"]
    assert [code for code, _ in errors()] == ["jobconsole.E001"]
    jc.JOBCONSOLE = {}
    monkeypatch.setenv("WORKER_CONCURRENCY", "ten")
    monkeypatch.setenv("JOBCONSOLE_MIRROR_IN_WORKER", "maybe")
    assert [code for code, _ in errors()] == ["jobconsole.E004"] * 2
    # An explicit setting wins, so its variable is not read at all.
    jc.JOBCONSOLE = {"WORKER_CONCURRENCY": 4, "MIRROR": {"IN_WORKER": True}}
    assert errors() == []
    assert fresh()["WORKER_CONCURRENCY"] == 4


def test_check_says_what_is_wrong_in_groups_and_queue_limits(jc: Any) -> None:
    jc.JOBCONSOLE = {"GROUPS": {"payments": {"connections": 2, "requests": [5, "fortnight"]}}}
    [(code, message)] = errors()
    assert code == "jobconsole.E003" and "second, minute or hour" in message
    jc.JOBCONSOLE = {"QUEUE_LIMITS": {"reports": 0}}
    [(code, message)] = errors()
    assert "must be a whole number of at least 1" in message
    jc.JOBCONSOLE = {"GROUPS": {"payments": {"connections": 2, "requests": [10, "second"]}}, "QUEUE_LIMITS": {"r": 4}}
    assert errors() == []
