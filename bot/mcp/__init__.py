"""MCP servers as tools: the client (``bot.mcp.client``), result conversion (``results``),
tool schemas (``schema``) and ``chela mcp test`` (``diagnose``)."""
