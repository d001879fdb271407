"""``manage.py mcp``: the MCP server over streamable HTTP at ``/mcp/`` (its own port), or over stdio."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Serve the archive to agents over MCP: streamable HTTP at http://HOST:PORT/mcp/ (API key as bearer), "
        "or --stdio for a local agent (the key in CONSOLE_API_KEY)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stdio", action="store_true", help="serve one client over stdin/stdout")
        parser.add_argument("--host", default=os.environ.get("MCP_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("MCP_PORT", "8001")))

    def handle(self, *args: Any, **options: Any) -> None:
        from console import mcp_server

        if options["stdio"]:
            key = os.environ.get("CONSOLE_API_KEY", "")
            if not key:
                raise CommandError("set CONSOLE_API_KEY to a console API key whose role may read sessions")
            try:
                mcp_server.use_stdio_key(key)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            mcp_server.build_server().run("stdio")
            return
        import uvicorn

        self.stderr.write(f"MCP server at http://{options['host']}:{options['port']}/mcp/")
        uvicorn.run(mcp_server.http_app(), host=options["host"], port=options["port"], log_level="warning")
