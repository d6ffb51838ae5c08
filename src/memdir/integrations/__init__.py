"""Memory for the agent hosts people already run: an MCP server, host hooks, and the
Anthropic memory-tool backend. Each module imports its host's SDK; none is imported by the core."""
