"""Prompt templates shipped as YAML: Jinja2 with StrictUndefined (a missing variable is an error)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import jinja2
import yaml

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


@lru_cache(maxsize=None)
def load(name: str) -> dict:
    """Load ``halucheck/prompts/<name>.yaml`` with every string compiled as a template."""
    text = resources.files(__name__).joinpath(f"{name}.yaml").read_text("utf-8")

    def compile_(v):
        if isinstance(v, dict):
            return {k: compile_(x) for k, x in v.items()}
        return _ENV.from_string(v) if isinstance(v, str) else v

    return compile_(yaml.safe_load(text))
