#!/usr/bin/env python3
"""A scripted model server for the end-to-end suite (Python standard library only).

    python3 tests/e2e/model_server.py --script SCRIPT.json --record RECORD.jsonl [--port N]
                                      [--exit-with-parent]

Binds 127.0.0.1 (port 0 = any free port), prints `PORT <n>` as its first stdout line and
serves until killed.

SCRIPT.json is `{"steps": [STEP, ...]}`. Each model request (any supported endpoint)
consumes the next step, rendered in that endpoint's wire format (with SSE when the request
asks to stream). A STEP is
  {"tool_call": {"name": "Edit", "input": {...}}}  one tool call, in the agent's own tool
                                                     name and argument shape; an "input"
                                                     that is a string becomes a freeform
                                                     (custom) tool call on the Responses API
  {"text": "..."}                                   the final answer, end of turn.
When the steps are exhausted it answers {"text": "done"}. A step may also carry
"wait_for": PATH: the request is recorded at once, but answered only once PATH exists (at most
300 s), so a test can look at (or change) the world at a known point of the agent's run.

A request that offers the model no tools (a title, a summary, a next-speaker or routing
check, a quota probe: the agents' side requests) consumes no step and gets the script's
"side_text" (default "ok"), or a small JSON object when the request asks for JSON.
Non-generation endpoints (model lists, token counting, telemetry) get minimal valid answers
and consume no step.

RECORD.jsonl gets one line per request: {"path": ..., "step": i or null, "body": <JSON>}.

Wire formats: Anthropic Messages (POST /v1/messages), OpenAI Responses (POST /v1/responses)
and Chat Completions (POST /v1/chat/completions), Gemini :generateContent and
:streamGenerateContent (?alt=sse). Paths are matched by their ending, so any base-path
prefix works.
"""

import argparse
import gzip
import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

MODEL = "scripted-model"


class Script:
    def __init__(self, steps, side_text, record_path):
        self.steps = steps
        self.side_text = side_text
        self.next = 0
        self.lock = threading.Lock()
        self.record = open(record_path, "a", encoding="utf-8")

    def take(self, path, body, generation):
        """Records the request; returns (index, step) or (None, None) for a side request."""
        with self.lock:
            index = None
            step = None
            if generation:
                index = self.next
                self.next += 1
                step = self.steps[index] if index < len(self.steps) else {"text": "done"}
            self.record.write(json.dumps({"path": path, "step": index, "body": body}) + "\n")
            self.record.flush()
            return index, step


def tool_call_of(step):
    call = step.get("tool_call")
    if call is None:
        return None
    return call["name"], call.get("input", {})


def sse(event, data):
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()


# ---------------------------------------------------------------- Anthropic Messages


def anthropic(step, index, stream):
    msg_id = f"msg_{index}"
    call = tool_call_of(step)
    usage = {"input_tokens": 10, "output_tokens": 5}
    if call:
        name, args = call
        block = {"type": "tool_use", "id": f"toolu_{index}", "name": name, "input": args}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": step.get("text", "done")}
        stop = "end_turn"
    if not stream:
        return "application/json", json.dumps({
            "id": msg_id, "type": "message", "role": "assistant", "model": MODEL,
            "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage,
        }).encode()
    out = [sse("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    if call:
        start = dict(block, input={})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    out.append(sse("content_block_start",
                   {"type": "content_block_start", "index": 0, "content_block": start}))
    out.append(sse("content_block_delta",
                   {"type": "content_block_delta", "index": 0, "delta": delta}))
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return "text/event-stream", b"".join(out)


# ---------------------------------------------------------------- OpenAI Responses


def responses(step, index, stream):
    resp_id = f"resp_{index}"
    call = tool_call_of(step)
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    if call:
        name, args = call
        if isinstance(args, str):
            item = {"type": "custom_tool_call", "id": f"ctc_{index}", "status": "completed",
                    "call_id": f"call_{index}", "name": name, "input": args}
        else:
            item = {"type": "function_call", "id": f"fc_{index}", "status": "completed",
                    "call_id": f"call_{index}", "name": name, "arguments": json.dumps(args)}
    else:
        text = step.get("text", "done")
        item = {"type": "message", "id": f"msg_{index}", "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    response = {"id": resp_id, "object": "response", "created_at": int(time.time()),
                "status": "completed", "model": MODEL, "output": [item], "usage": usage}
    if not stream:
        return "application/json", json.dumps(response).encode()
    seq = iter(range(1000))
    in_progress = dict(response, status="in_progress", output=[], usage=None)
    out = [sse("response.created", {"type": "response.created", "sequence_number": next(seq),
                                    "response": in_progress})]
    out.append(sse("response.in_progress", {"type": "response.in_progress",
                                            "sequence_number": next(seq),
                                            "response": in_progress}))
    if item["type"] == "message":
        empty = dict(item, status="in_progress", content=[])
        out.append(sse("response.output_item.added", {
            "type": "response.output_item.added", "sequence_number": next(seq),
            "output_index": 0, "item": empty}))
        out.append(sse("response.content_part.added", {
            "type": "response.content_part.added", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []}}))
        out.append(sse("response.output_text.delta", {
            "type": "response.output_text.delta", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "content_index": 0,
            "delta": item["content"][0]["text"]}))
        out.append(sse("response.output_text.done", {
            "type": "response.output_text.done", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "content_index": 0,
            "text": item["content"][0]["text"]}))
        out.append(sse("response.content_part.done", {
            "type": "response.content_part.done", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "content_index": 0,
            "part": item["content"][0]}))
    elif item["type"] == "function_call":
        out.append(sse("response.output_item.added", {
            "type": "response.output_item.added", "sequence_number": next(seq),
            "output_index": 0, "item": dict(item, status="in_progress", arguments="")}))
        out.append(sse("response.function_call_arguments.delta", {
            "type": "response.function_call_arguments.delta", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "delta": item["arguments"]}))
        out.append(sse("response.function_call_arguments.done", {
            "type": "response.function_call_arguments.done", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "arguments": item["arguments"]}))
    else:
        out.append(sse("response.output_item.added", {
            "type": "response.output_item.added", "sequence_number": next(seq),
            "output_index": 0, "item": dict(item, status="in_progress", input="")}))
        out.append(sse("response.custom_tool_call_input.delta", {
            "type": "response.custom_tool_call_input.delta", "sequence_number": next(seq),
            "item_id": item["id"], "output_index": 0, "delta": item["input"]}))
    out.append(sse("response.output_item.done", {
        "type": "response.output_item.done", "sequence_number": next(seq),
        "output_index": 0, "item": item}))
    out.append(sse("response.completed", {"type": "response.completed",
                                          "sequence_number": next(seq),
                                          "response": response}))
    return "text/event-stream", b"".join(out)


# ---------------------------------------------------------------- Chat Completions


def chat(step, index, stream, body):
    chat_id = f"chatcmpl_{index}"
    created = int(time.time())
    call = tool_call_of(step)
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if call:
        name, args = call
        arguments = args if isinstance(args, str) else json.dumps(args)
        tool_call = {"index": 0, "id": f"call_{index}", "type": "function",
                     "function": {"name": name, "arguments": arguments}}
        message = {"role": "assistant", "content": None,
                   "tool_calls": [{k: v for k, v in tool_call.items() if k != "index"}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": step.get("text", "done")}
        finish = "stop"
    if not stream:
        return "application/json", json.dumps({
            "id": chat_id, "object": "chat.completion", "created": created, "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage}).encode()

    def chunk(delta, finish_reason=None, **extra):
        data = {"id": chat_id, "object": "chat.completion.chunk", "created": created,
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        data.update(extra)
        return sse(None, data)

    out = [chunk({"role": "assistant", "content": ""})]
    if call:
        out.append(chunk({"tool_calls": [tool_call]}))
    else:
        out.append(chunk({"content": message["content"]}))
    out.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        out.append(sse(None, {"id": chat_id, "object": "chat.completion.chunk",
                              "created": created, "model": MODEL, "choices": [],
                              "usage": usage}))
    out.append(b"data: [DONE]\n\n")
    return "text/event-stream", b"".join(out)


# ---------------------------------------------------------------- Gemini


def gemini(step, index, stream):
    call = tool_call_of(step)
    if call:
        name, args = call
        part = {"functionCall": {"name": name, "args": args}}
    else:
        part = {"text": step.get("text", "done")}
    data = {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": MODEL, "responseId": f"resp_{index}"}
    if not stream:
        return "application/json", json.dumps(data).encode()
    return "text/event-stream", sse(None, data)


def gemini_json_text():
    # What Gemini CLI's side checks parse (next speaker, model routing and its classifier).
    return json.dumps({"reasoning": "scripted", "next_speaker": "user",
                       "model_choice": "flash", "complexity_reasoning": "scripted",
                       "complexity_score": 10})


# ---------------------------------------------------------------- the server


def offers_tools(kind, body):
    if kind == "gemini":
        return any(t.get("functionDeclarations") for t in body.get("tools") or [])
    return bool(body.get("tools"))


def asks_json(kind, body):
    if kind == "gemini":
        config = body.get("generationConfig") or {}
        return config.get("responseMimeType") == "application/json"
    if kind == "chat":
        return (body.get("response_format") or {}).get("type") in ("json_object",
                                                                    "json_schema")
    return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-model"

    def log_message(self, fmt, *args):  # quiet; RECORD.jsonl is the log
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        return raw

    def reply(self, status, content_type, payload):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def reply_json(self, data, status=200):
        self.reply(status, "application/json", json.dumps(data).encode())

    def do_GET(self):
        path = urlsplit(self.path).path
        self.server.script.take(self.path, None, False)
        if path.rstrip("/").endswith("/models") or path.rstrip("/") == "/models":
            self.reply_json({"object": "list", "models": [],
                             "data": [{"id": MODEL, "object": "model", "created": 0,
                                       "owned_by": "scripted", "type": "model",
                                       "display_name": MODEL}],
                             "has_more": False, "first_id": MODEL, "last_id": MODEL})
        else:
            self.reply_json({})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        raw = self.read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        script = self.server.script
        if path.endswith("/count_tokens"):
            script.take(self.path, body, False)
            return self.reply_json({"input_tokens": 10})
        if path.endswith(":countTokens"):
            script.take(self.path, body, False)
            return self.reply_json({"totalTokens": 10})
        if path.endswith("/messages"):
            kind = "anthropic"
        elif path.endswith("/responses"):
            kind = "responses"
        elif path.endswith("/chat/completions"):
            kind = "chat"
        elif path.endswith(":streamGenerateContent"):
            kind = "gemini"
        elif path.endswith(":generateContent"):
            kind = "gemini"
        else:  # telemetry, event logging: accept and forget
            script.take(self.path, body, False)
            return self.reply_json({})
        if not isinstance(body, dict):
            body = {}
        generation = offers_tools(kind, body)
        index, step = script.take(self.path, body, generation)
        gate = (step or {}).get("wait_for")
        if gate:
            deadline = time.monotonic() + 300
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.05)
        if step is None:
            if asks_json(kind, body):
                step = {"text": gemini_json_text()}
            else:
                step = {"text": script.side_text}
            index = "side"
        if kind == "anthropic":
            content_type, payload = anthropic(step, index, bool(body.get("stream")))
        elif kind == "responses":
            content_type, payload = responses(step, index, body.get("stream", False))
        elif kind == "chat":
            content_type, payload = chat(step, index, bool(body.get("stream")), body)
        else:
            stream = path.endswith(":streamGenerateContent")
            if stream and "alt=sse" not in url.query:
                # Without alt=sse the stream is a JSON array of responses.
                _, one = gemini(step, index, False)
                content_type, payload = "application/json", b"[" + one + b"]"
            else:
                content_type, payload = gemini(step, index, stream)
        self.reply(200, content_type, payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="exit when the process that started the server is gone")
    args = parser.parse_args()
    if args.exit_with_parent:
        parent = os.getppid()

        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)

        threading.Thread(target=watch, daemon=True).start()
    with open(args.script, encoding="utf-8") as f:
        script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.script = Script(script.get("steps", []), script.get("side_text", "ok"),
                           args.record)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
