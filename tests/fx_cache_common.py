"""What the tests of tests/ext/fx_graph_cache/ share: a cache folder per test module, with the
cache on and its log captured (the rest of the suite runs with it off: tests/conftest.py), and
the counters' changes and log lines of a compile."""
from __future__ import annotations

import logging

import pytest
import torch


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fx_graph_cache")


@pytest.fixture
def cache(folder, monkeypatch, caplog):
    monkeypatch.setenv("MINIINDUCTOR_CACHE_DIR", str(folder))
    monkeypatch.setenv("MINIINDUCTOR_FX_GRAPH_CACHE", "1")
    caplog.set_level(logging.INFO, logger="miniinductor.cache")
    torch._dynamo.reset()
    yield folder
    torch._dynamo.reset()


def changes(counters: dict, before: dict) -> dict:
    """The counters that moved since `before`, by how much."""
    return {k: v - before[k] for k, v in counters.items() if v != before[k]}


def messages(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "miniinductor.cache")
