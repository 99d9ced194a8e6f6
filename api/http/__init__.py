"""The HTTP API: the FastAPI app, its dependencies and schemas, and a router per resource."""
