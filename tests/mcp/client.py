"""A real MCP client (the official `mcp` package) driving `conductor mcp` for tests/it/mcp.rs.

Usage: client.py PLAN_JSON. The server is `$CONDUCTOR_BIN mcp $MCP_ARGS...` in the current
directory, with this process's environment. PLAN_JSON is a list of steps:
  {"list": true}                      -> prints {"tools": [names]}
  {"list": true, "schemas": true}     -> prints {"tools": [names], "schemas": {name: inputSchema}}
  {"tool": NAME, "args": {...}}       -> prints {"tool", "is_error", "text", "structured", "ms"}
  {"sync": LABEL}                     -> prints {"sync": LABEL}, then waits for a line on stdin
  {"repeat": N, "tool": NAME, "args_each": [{...}, ...]} -> prints {"tool", "ms": [each call]}
  {"resources": true}                 -> prints {"resources": [uris], "templates": [uri templates]}
  {"read": URI}                       -> prints {"read": URI, "text": ...} or {"read": URI, "error": ...}
  {"subscribe": URI}                  -> prints {"subscribed": URI} or {"subscribe": URI, "error": ...}
  {"updated": URI, "within": SECS}    -> waits for notifications/resources/updated of URI (one not
                                         consumed yet), prints {"updated": URI, "ms"} or {"timeout": URI}
  {"updates_for": SECS}               -> prints {"updates": [URIs]}: every update not consumed yet,
                                         after waiting SECS
  {"cancel": NAME, "args": {...}}     -> starts the call, prints {"started": NAME}, waits for a line on
                                         stdin, cancels the call (notifications/cancelled), prints
                                         {"cancelled": NAME, "ms"}: how long the cancel took to settle
One JSON line per step on stdout, flushed at once.
"""

import asyncio
import json
import os
import sys
import time
import warnings

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

warnings.simplefilter("ignore")  # resources/subscribe is "2025-era": the handshake negotiates it


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
    updates = []  # URIs of notifications/resources/updated, in arrival order, not consumed yet
    arrived = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            arrived.set()

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            for step in plan:
                if step.get("resources"):
                    res = await session.list_resources()
                    tmpl = await session.list_resource_templates()
                    emit({"resources": [str(r.uri) for r in res.resources],
                          "templates": [t.uri_template for t in tmpl.resource_templates]})
                elif "read" in step:
                    try:
                        res = await session.read_resource(step["read"])
                        emit({"read": step["read"], "text": res.contents[0].text})
                    except Exception as e:  # an MCP error answer
                        emit({"read": step["read"], "error": str(e)})
                elif "subscribe" in step:
                    try:
                        await session.subscribe_resource(step["subscribe"])
                        emit({"subscribed": step["subscribe"]})
                    except Exception as e:
                        emit({"subscribe": step["subscribe"], "error": str(e)})
                elif "updated" in step:
                    uri, t0 = step["updated"], time.perf_counter()
                    deadline = t0 + step["within"]
                    while uri not in updates and time.perf_counter() < deadline:
                        arrived.clear()
                        try:
                            await asyncio.wait_for(arrived.wait(), deadline - time.perf_counter())
                        except asyncio.TimeoutError:
                            pass
                    if uri in updates:
                        updates.remove(uri)
                        emit({"updated": uri, "ms": (time.perf_counter() - t0) * 1000})
                    else:
                        emit({"timeout": uri})
                elif "updates_for" in step:
                    await asyncio.sleep(step["updates_for"])
                    emit({"updates": list(updates)})
                    updates.clear()
                elif "cancel" in step:
                    call = asyncio.ensure_future(session.call_tool(step["cancel"], step.get("args", {})))
                    emit({"started": step["cancel"]})
                    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                    t0 = time.perf_counter()
                    call.cancel()
                    try:
                        await call
                    except asyncio.CancelledError:
                        pass
                    emit({"cancelled": step["cancel"], "ms": (time.perf_counter() - t0) * 1000})
                elif step.get("list"):
                    tools = await session.list_tools()
                    out = {"tools": [t.name for t in tools.tools]}
                    if step.get("schemas"):
                        out["schemas"] = {t.name: t.input_schema for t in tools.tools}
                    emit(out)
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
