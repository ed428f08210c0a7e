"""models.yaml -> Settings: profiles, role -> profile mapping and precedence."""

import dataclasses

import pytest

from halucheck.config import Settings, parse_role_overrides
from halucheck.engines.pool import EnginePool
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
    pool = EnginePool(s)
    assert pool.engine_for("trust") is pool.engine_for("skeptic")  # one engine per profile
    assert pool.engine_for("leader") is not pool.engine_for("trust")
    assert isinstance(pool.engine_for("leader"), FakeEngine) and pool.engine_for("leader").model == "j"
    assert s.sampling_for("initial") == {"temperature": 0.2}
    assert pool.engine_for("initial").options == {}  # sampling keys are not engine options
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.default_profile = "big"  # settings are data, resolved once


def test_pool_wraps_engines_in_order_and_closes_them():
    closed, order = [], []

    class Wrap(FakeEngine):
        def __init__(self, inner, tag):
            super().__init__()
            self.inner, self.tag = inner, tag
            order.append(tag)

        def close(self):
            closed.append(self.tag)

    pool = EnginePool(Settings.from_dict(RAW), wrappers=(lambda e: Wrap(e, "cache"),))
    pool.add_wrapper(lambda e: Wrap(e, "meter"))
    outer = pool.engine_for("initial")
    assert outer.tag == "meter" and outer.inner.tag == "cache" and order == ["cache", "meter"]
    pool.close()
    assert closed == ["meter"] and pool.engine_for("initial") is not outer  # closed engines are not reused


def test_profile_flag_overrides_yaml_roles_and_role_flag_overrides_profile():
    s = Settings.from_dict(RAW, profile="big", role_overrides={"skeptic": "judge"})
    assert s.profile_for("leader").name == "big"
    assert s.profile_for("skeptic").name == "judge"
    assert EnginePool(s).engine_for("trust").max_batch == 4


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
    with pytest.raises(ConfigError, match="unknown engine .llamacpp.*Available: .*fake"):
        EnginePool(s).engine_for("initial")


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


def test_a_profile_given_twice_is_an_error_naming_both_lines(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text("default_profile: a\nprofiles:\n  a:\n    engine: fake\n  b:\n    engine: fake\n"
                 "  a:\n    engine: transformers\n")
    with pytest.raises(ConfigError, match=r"models.yaml:7: not valid YAML \('a' is given twice \(first on line 3\)"):
        Settings.load(p)


def test_role_sampling_section_overrides_the_profile_and_is_checked():
    raw = {**RAW, "sampling": {"initial": {"max_tokens": 99, "temperature": 0.0, "no_repeat_ngram_size": 6},
                               "query": {"max_tokens": 40}}}
    s = Settings.from_dict(raw)
    assert s.sampling_for("initial") == {"temperature": 0.0, "max_tokens": 99, "no_repeat_ngram_size": 6}
    assert s.sampling_for("trust") == {"temperature": 0.2}  # the profile's own key stays
    from halucheck.engines.base import SamplingParams

    merged = s.sampling("query", SamplingParams(max_tokens=96, top_p=0.5))
    assert (merged.max_tokens, merged.top_p, merged.temperature) == (40, 0.5, 0.2)
    with pytest.raises(ConfigError, match="unknown sampling setting 'max_token'.*valid: temperature"):
        Settings.from_dict({**RAW, "sampling": {"leader": {"max_token": 10}}})
    with pytest.raises(ConfigError, match="unknown role 'judge' under `sampling:`"):
        Settings.from_dict({**RAW, "sampling": {"judge": {"max_tokens": 10}}})
    with pytest.raises(ConfigError, match="frequency_penalty must be a number"):
        Settings.from_dict({**RAW, "sampling": {"leader": {"frequency_penalty": "lots"}}})


def test_shipped_config_caps_every_debate_role_and_guards_the_first_agent_only():
    s = Settings.load()
    controls = {"repetition_penalty", "frequency_penalty", "presence_penalty", "no_repeat_ngram_size"}
    for role in ("initial", "trust", "skeptic", "leader"):
        assert s.sampling_for(role).get("max_tokens"), role
    first = s.sampling_for("initial")  # free-text reasoning (selfcheck's, and the debate's first agent)
    assert first.get("frequency_penalty") or first.get("repetition_penalty", 1) != 1
    # the stances quote the passages word for word and the Leader reads the quotes: none is set for them
    # (Agents.request would drop it anyway)
    for role in ("trust", "skeptic", "leader"):
        assert not controls & set(s.sampling_for(role)), role


def test_every_halucheck_variable_is_read_in_config_only():
    import pathlib
    import re

    import halucheck

    root = pathlib.Path(halucheck.__file__).parent
    readers = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "config.py"
               for n, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"environ(\.get)?[\[(]\s*[\"']HALUCHECK_", line)]
    assert readers == []
    from halucheck.config import ENV_VARS, env

    documented = (root.parent / "README.md").read_text()
    assert [v for v in ENV_VARS if v not in documented] == []
    with pytest.raises(KeyError):
        env("HALUCHECK_TYPO")


def test_index_run_and_search_share_one_index_location(tmp_path, monkeypatch):
    from halucheck.config import index_path

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HALUCHECK_INDEX", raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    own = index_path(docs)
    assert own == index_path(str(docs) + "/") and own.parent == tmp_path / "home" / "indexes"
    assert index_path(tmp_path / "other") != own
    assert index_path(docs, tmp_path / "x.duckdb") == tmp_path / "x.duckdb"  # the flag wins
    with pytest.raises(ConfigError, match="halucheck index DIR"):
        index_path()  # search without --corpus and no index yet
    own.parent.mkdir(parents=True)
    own.touch()
    assert index_path() == own  # the only index there is
    index_path(tmp_path / "other").touch()
    with pytest.raises(ConfigError, match="--corpus DIR"):
        index_path()
    monkeypatch.setenv("HALUCHECK_INDEX", str(tmp_path / "env.duckdb"))
    assert index_path(docs) == tmp_path / "env.duckdb"


def test_half_precision_weights_load_in_int8_or_float32_where_the_cpu_has_no_native_half_matmul(tmp_path):
    """bfloat16 weights on an AVX2-only CPU: torch's generic bf16 kernel was ~100x slower than float32
    there, so the engine loads them in int8 (float32 where torch has no int8 kernels) unless models.yaml
    says otherwise."""
    import json

    from halucheck.engines.loading import load_dtype, saved_dtype

    assert load_dtype(None, "bfloat16", native=set()) == "float32"
    assert load_dtype(None, "bfloat16", native=set(), int8_ok=True) == "int8"
    assert load_dtype(None, "bfloat16", native={"bfloat16"}, int8_ok=True) == "auto"  # native: as saved
    assert load_dtype("float32", "bfloat16", native=set(), int8_ok=True) == "float32"
    assert load_dtype(None, "float16", native={"bfloat16"}) == "float32"
    assert load_dtype(None, "bfloat16", native={"bfloat16"}) == "auto"
    assert load_dtype(None, "float32", native=set()) == "auto"
    assert load_dtype(None, None, native=set()) == "auto"  # unknown: as saved
    assert load_dtype("bfloat16", "bfloat16", native=set()) == "bfloat16"  # dtype: in models.yaml wins
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    assert saved_dtype(tmp_path) == "bfloat16"
    (tmp_path / "config.json").write_text(json.dumps({"dtype": "float16", "torch_dtype": "float32"}))
    assert saved_dtype(tmp_path) == "float16"
    (tmp_path / "config.json").write_text("{not json")
    assert saved_dtype(tmp_path) is None
