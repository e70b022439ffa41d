"""The MCP server (``ragstream mcp``): ragstream's search, document status and uploads
as Model Context Protocol tools, over stdio or streamable HTTP (the PyPI ``mcp`` SDK).

It is a client of ragstream's own HTTP API (``ragstream api``), holding one project
API key (``RAGSTREAM_MCP_API_KEY``): every tool is one or two API calls with that key,
so the API scopes everything to the key's project by construction — the MCP server
checks no project itself and reaches no database, bucket or broker.

Owns:
    api_client.py   the HTTP API client (httpx): one method per route used, errors
                    as :class:`ApiCallFailed` with the API's own message
    path_guard.py   upload by local path: only regular files under the operator's
                    ``--root``, symlinks and ``..`` resolved, size-capped
    tools.py        the MCP tools and the server (``build_server``)

May import: ``streams.settings``, ``streams.document_ids`` (the id pattern).  Never
``api`` (it speaks to the API over HTTP), ``adapters``, ``agents``, ``devstack``;
nothing but ``cli`` imports ``mcp_server``.
"""
