"""The MCP face: cogmill's use cases as MCP tools and resources, over stdio (`cogmill mcp`) and
streamable HTTP (`/mcp` in `cogmill serve`, with the HTTP API's keys and tenants)."""
