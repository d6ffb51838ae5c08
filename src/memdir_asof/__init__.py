"""What a store held at a moment in the past (``past``): ``memdir search --as-of``,
``memdir recall --as-of`` and MCP ``recall(as_of=…)``, found by the core through the
``memdir.asof`` entry points."""
