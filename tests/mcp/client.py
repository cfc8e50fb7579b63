"""A real MCP client (the official `mcp` package) driving `conductor mcp` for tests/it/mcp.rs.

Usage: client.py PLAN_JSON. The server is `$CONDUCTOR_BIN mcp $MCP_ARGS...` in the current
directory, with this process's environment. PLAN_JSON is a list of steps:
  {"list": true}                      -> prints {"tools": [names]}
  {"tool": NAME, "args": {...}}       -> prints {"tool", "is_error", "text", "structured", "ms"}
  {"sync": LABEL}                     -> prints {"sync": LABEL}, then waits for a line on stdin
  {"repeat": N, "tool": NAME, "args_each": [{...}, ...]} -> prints {"tool", "ms": [each call]}
One JSON line per step on stdout, flushed at once.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main():
    plan = json.loads(sys.argv[1])
    extra = json.loads(os.environ.get("MCP_ARGS", "[]"))
    params = StdioServerParameters(
        command=os.environ["CONDUCTOR_BIN"],
        args=["mcp", *extra],
        env=dict(os.environ),
        cwd=os.getcwd(),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for step in plan:
                if step.get("list"):
                    tools = await session.list_tools()
                    emit({"tools": [t.name for t in tools.tools]})
                elif "sync" in step:
                    emit({"sync": step["sync"]})
                    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                elif "repeat" in step:
                    times = []
                    for args in step["args_each"]:
                        t0 = time.perf_counter()
                        res = await session.call_tool(step["tool"], args)
                        times.append((time.perf_counter() - t0) * 1000)
                        if res.is_error:
                            emit({"tool": step["tool"], "is_error": True, "text": res.content[0].text})
                            return
                    emit({"tool": step["tool"], "ms": times})
                else:
                    t0 = time.perf_counter()
                    res = await session.call_tool(step["tool"], step.get("args", {}))
                    ms = (time.perf_counter() - t0) * 1000
                    text = "\n".join(c.text for c in res.content if getattr(c, "type", "") == "text")
                    emit({"tool": step["tool"], "is_error": bool(res.is_error), "text": text,
                          "structured": res.structured_content, "ms": ms})


asyncio.run(main())
