"""What the model adapters may import, as an allow-list: a provider knows how to talk to a
model and nothing of memories, so a module added anywhere else is out of their reach without
editing any list (the import-linter contracts in pyproject.toml say the layers)."""

from __future__ import annotations

import grimp
import pytest

# the only memdir modules outside memdir.providers that the adapters and FakeModel may import
PROVIDERS_MAY_IMPORT = frozenset(
    {
        "memdir.config",  # the settings a model is made from
        "memdir.errors",
        "memdir.disk.layout",  # the names of memdir's own files (the endpoints note)
        "memdir.gate.safetext",  # rendering a transcript's turns for a host CLI
        "memdir.disk.statefile",
        "memdir.usage",  # the usage log every call is recorded in
    }
)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("memdir", "memdir_testing", exclude_type_checking_imports=True)


def _adapters(graph: grimp.ImportGraph) -> list[str]:
    return sorted(
        m for m in graph.modules if m.startswith("memdir.providers") or m == "memdir_testing"
    )


def test_the_model_adapters_import_only_what_the_allow_list_names(
    graph: grimp.ImportGraph,
) -> None:
    """Every module of memdir.providers (and memdir_testing) imports memdir modules only from
    the allow-list or from memdir.providers itself."""
    adapters = _adapters(graph)
    assert "memdir.providers.anthropic" in adapters and "memdir_testing" in adapters
    outside = {
        (module, imported)
        for module in adapters
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("memdir.")
        and not imported.startswith("memdir.providers")
        and imported not in PROVIDERS_MAY_IMPORT
    }
    assert outside == set()


def test_the_allow_list_reaches_nothing_of_memories(graph: grimp.ImportGraph) -> None:
    """What the allow-list names does not itself lead to the store, recall or learning."""
    reached: set[str] = set()
    for module in PROVIDERS_MAY_IMPORT:
        reached |= graph.find_upstream_modules(module)
    memories = {
        "memdir.memory",
        "memdir.store",
        "memdir.recall",
        "memdir.learn.extract",
    }
    assert reached, "the graph found no imports at all"
    assert {m for m in reached if any(m == x or m.startswith(x + ".") for x in memories)} == set()
