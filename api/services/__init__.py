"""The use cases, one function each, that every face (CLI, HTTP, MCP) parses for, calls and
renders: no typer or FastAPI here. Guards (running jobs, tenancy, limits) live here, once."""
