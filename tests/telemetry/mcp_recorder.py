"""A minimal MCP server on stdio (newline-delimited JSON-RPC) with one tool, `echo`, that
appends every request it gets to the file named by its first argument, so a test can look
at the `_meta` the agent sent with its calls. With a second argument `dup` it lists the
tool twice, which the agent warns about (a log record to find in the turn's trace)."""

import json
import sys

record = open(sys.argv[1], "a", buffering=1)
for line in sys.stdin:
    message = json.loads(line)
    record.write(json.dumps(message) + "\n")
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "recorder", "version": "1"}}
    elif method == "tools/list":
        tool = {"name": "echo", "description": "Echoes its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
        result = {"tools": [tool, tool] if sys.argv[2:] == ["dup"] else [tool]}
    elif method == "tools/call":
        text = message["params"].get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                     "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
