"""``memdir mcp --http``: the MCP server over streamable HTTP, for an agent on another machine
and for a team's server (``memdir_postgres``'s identities, each person with their own token
and stores): ``serve`` runs it behind ``guard``. The tools are the core's (``memdir mcp``);
this wing adds the transport, who may call it and, for a team, whose tools a request gets."""
