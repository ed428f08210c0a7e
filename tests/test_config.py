"""models.yaml -> Settings: profiles, role -> profile mapping and precedence."""

import pytest

from halucheck.config import Settings, parse_role_overrides
from halucheck.engines.fake import FakeEngine
from halucheck.errors import ConfigError

RAW = {
    "default_profile": "small",
    "profiles": {
        "small": {"engine": "fake", "model": "s", "temperature": 0.2},
        "big": {"engine": "fake", "model": "b", "max_batch": 4},
        "judge": {"engine": "fake", "model": "j"},
    },
    "roles": {"leader": "judge"},
}


def test_roles_map_to_profiles_and_share_engines():
    s = Settings.from_dict(RAW)
    assert s.profile_for("initial").name == "small"
    assert s.profile_for("leader").name == "judge"
    assert s.engine_for("trust") is s.engine_for("skeptic")  # one engine per profile
    assert s.engine_for("leader") is not s.engine_for("trust")
    assert isinstance(s.engine_for("leader"), FakeEngine) and s.engine_for("leader").model == "j"
    assert s.sampling_for("initial") == {"temperature": 0.2}
    assert s.engine_for("initial").options == {}  # sampling keys are not engine options


def test_profile_flag_overrides_yaml_roles_and_role_flag_overrides_profile():
    s = Settings.from_dict(RAW, profile="big", role_overrides={"skeptic": "judge"})
    assert s.profile_for("leader").name == "big"
    assert s.profile_for("skeptic").name == "judge"
    assert s.engine_for("trust").max_batch == 4


def test_env_profile_overrides_yaml(monkeypatch):
    monkeypatch.setenv("HALUCHECK_PROFILE", "big")
    s = Settings.from_dict(RAW)
    assert s.profile_for("leader").name == "big"
    assert Settings.from_dict(RAW, profile="small").profile_for("leader").name == "small"  # flag > env


def test_unknown_profile_suggests_a_name():
    with pytest.raises(ConfigError, match=r"unknown profile 'bgi'. Did you mean 'big'\?"):
        Settings.from_dict(RAW, profile="bgi")


def test_unknown_role_and_bad_role_flag():
    with pytest.raises(ConfigError, match="unknown role 'critic'"):
        Settings.from_dict(RAW, role_overrides={"critic": "big"})
    with pytest.raises(ConfigError, match="ROLE=PROFILE"):
        parse_role_overrides(["skeptic"])


def test_unknown_engine_lists_available():
    s = Settings.from_dict({"profiles": {"x": {"engine": "llamacpp"}}})
    with pytest.raises(ConfigError, match="unknown engine 'llamacpp'.*available engines: fake"):
        s.engine_for("initial")


def test_shipped_models_yaml_is_valid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./models.yaml here: the packaged copy is used
    s = Settings.load()
    assert s.default_profile in s.profiles
    assert {"cpu-0.5b", "cpu-1.5b", "vllm", "vllm-local", "fake"} <= set(s.profiles)


def test_broken_yaml_names_the_line(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text("profiles:\n  a: {engine: fake\n")
    with pytest.raises(ConfigError, match=r"models.yaml:\d+: not valid YAML"):
        Settings.load(p)
