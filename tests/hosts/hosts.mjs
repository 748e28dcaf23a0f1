// The three hosts: how each is configured and run headless, and a scripted mock of each
// host's own model speaking that model's real wire format. A script is a list of steps; step
// i answers the host's i-th main model request (the one that offers our tools) and gets
// the tool results that request carries, i.e. exactly what the host handed its model. A step
// returns {tool, args} (a call of one of our tools, by its MCP name) or {text}.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  NODE_MODULES, baseEnv, ensureDir, findUuid, runHost, sendJson, sendSse, startModelServer,
} from "./harness.mjs";

/** The name the MCP server entry gets in every host's config. */
export const SERVER = "interp";

/** Plays a script; `turns` keeps every main request with the tool results it carried. */
class Script {
  constructor(steps) {
    this.steps = steps;
    this.turns = [];
    this.problems = [];
  }

  /** The action for the next main request (a text once the script has run out). */
  next(request, results) {
    const i = this.turns.length;
    const turn = { request, results, action: undefined };
    this.turns.push(turn);
    if (i >= this.steps.length) {
      this.problems.push(`main model request #${i + 1} beyond the script's ${this.steps.length} steps`);
      turn.action = { text: "(the mock's script has ended)" };
    } else {
      try {
        turn.action = this.steps[i]({ results, request, turn: i });
      } catch (error) {
        this.problems.push(`step ${i + 1}: ${error.stack ?? error}`);
        turn.action = { text: `(the mock's step ${i + 1} failed)` };
      }
    }
    return turn.action;
  }
}

/** The text of an MCP-ish content value as a model would read it. */
function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c) => (typeof c === "string" ? c : c.text ?? JSON.stringify(c))).join("\n");
  return JSON.stringify(content);
}

/** An instance of a (Gemini-flavoured, upper-case types allowed) JSON schema. */
export function schemaInstance(schema = {}) {
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  const type = String(schema.type ?? (schema.properties ? "object" : "string")).toLowerCase();
  switch (type) {
    case "object":
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, schemaInstance(v)]));
    case "array": return [];
    case "integer":
    case "number": return schema.minimum ?? 1;
    case "boolean": return false;
    default: return "mock";
  }
}

// ---------------------------------------------------------------------------------------
// Gemini CLI: the Gemini API (`:streamGenerateContent?alt=sse`, `:generateContent`,
// `:countTokens`); tools are `mcp_<server>_<tool>` function declarations; Gemini adds
// `wait_for_previous` to every tool's schema, and its model (our mock) passes it.

function geminiResponse(parts) {
  return {
    candidates: [{ content: { role: "model", parts }, index: 0, finishReason: "STOP" }],
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 2, totalTokenCount: 12 },
    modelVersion: "mock-gemini",
  };
}

function geminiResults(body) {
  const last = body.contents?.at(-1);
  if (last?.role !== "user") return [];
  return (last.parts ?? []).filter((p) => p.functionResponse).map(({ functionResponse: fr }) => {
    const response = fr.response ?? {};
    const text = typeof response.output === "string" ? response.output
      : typeof response.error === "string" ? response.error
        : JSON.stringify(response);
    return { name: fr.name, text, isError: "error" in response, raw: fr };
  });
}

export const gemini = {
  name: "gemini",
  title: "Gemini CLI 0.61.0",
  elicitation: "none",

  async startModel(steps) {
    const script = new Script(steps);
    const model = await startModelServer((r, res) => {
      const m = r.path.match(/^\/v1(?:beta)?\/models\/([^:/]+):(\w+)$/);
      if (r.method !== "POST" || !m) return false;
      const [, , method] = m;
      const reply = (parts) => (method === "streamGenerateContent"
        ? sendSse(res, [{ data: geminiResponse(parts) }])
        : sendJson(res, geminiResponse(parts)));
      if (method === "countTokens") return sendJson(res, { totalTokens: 10 });
      if (method !== "generateContent" && method !== "streamGenerateContent") return false;
      const config = r.body?.generationConfig ?? {};
      const schema = config.responseJsonSchema ?? config.responseSchema;
      if (schema || config.responseMimeType === "application/json") {
        // Router, classifier and other side calls: an answer of the requested shape.
        r.kind = "side";
        return reply([{ text: JSON.stringify(schemaInstance(schema)) }]);
      }
      const declarations = (r.body?.tools ?? []).flatMap((t) => t.functionDeclarations ?? []);
      if (!declarations.some((d) => d.name.startsWith(`mcp_${SERVER}_`))) {
        r.kind = "side";
        return reply([{ text: "ok" }]);
      }
      r.kind = "main";
      const action = script.next(r, geminiResults(r.body));
      if (action.text !== undefined) return reply([{ text: action.text }]);
      const name = `mcp_${SERVER}_${action.tool}`;
      const declared = declarations.find((d) => d.name === name);
      if (!declared) script.problems.push(`${name} not among the declarations: ${declarations.map((d) => d.name)}`);
      // Gemini's model sees `wait_for_previous` in every schema and fills it in.
      const args = { ...action.args };
      if (declared?.parametersJsonSchema?.properties?.wait_for_previous) args.wait_for_previous = false;
      return reply([{ functionCall: { name, args } }]);
    });
    return { ...model, script };
  },

  /** Whether `request` offers our tool `tool` to the model, under the name the host uses. */
  offers(request, tool) {
    return (request.body.tools ?? []).flatMap((t) => t.functionDeclarations ?? [])
      .some((d) => d.name === `mcp_${SERVER}_${tool}`);
  },

  entry(server) {
    if (server.stdio) {
      const { command, args, env, cwd } = server.stdio;
      return { command, args, env, cwd, trust: true, timeout: 120000 };
    }
    return { httpUrl: server.http.url, headers: { Authorization: `Bearer ${server.http.token}` }, trust: true, timeout: 120000 };
  },

  async run({ home, model, server, prompt, cwd, extraEnv = {} }) {
    ensureDir(join(home, ".gemini"));
    const settings = {
      security: { auth: { selectedType: "gemini-api-key" } },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: { [SERVER]: this.entry(server) },
    };
    writeFileSync(join(home, ".gemini", "settings.json"), JSON.stringify(settings, null, 2));
    const env = baseEnv(home, {
      GEMINI_API_KEY: "mock-key", GOOGLE_GEMINI_BASE_URL: model.origin, GEMINI_CLI_NO_RELAUNCH: "true", ...extraEnv,
    });
    return runHost(process.execPath, [
      // --debug puts the MCP client's errors (e.g. a failed connect) on stderr.
      join(NODE_MODULES, "@google/gemini-cli/bundle/gemini.js"), "--debug", "-p", prompt,
      "--output-format", "stream-json", "--yolo", "--skip-trust", "--allowed-mcp-server-names", SERVER,
    ], { env, cwd });
  },

  /** A trimmed copy of `request` for the docs fixture. */
  transcript(request) {
    const declarations = (request.body.tools ?? []).flatMap((t) => t.functionDeclarations ?? [])
      .filter((d) => d.name.startsWith(`mcp_${SERVER}_`))
      .map((d) => ({ name: d.name, parameters: Object.keys(d.parametersJsonSchema?.properties ?? d.parameters?.properties ?? {}) }));
    return { path: request.path, query: request.query, functionDeclarations: declarations, contents: request.body.contents.filter((c) => (c.parts ?? []).some((p) => p.functionCall || p.functionResponse)) };
  },
};

// ---------------------------------------------------------------------------------------
// Codex CLI: the Responses API (`POST /v1/responses`, SSE). MCP tools are one `namespace`
// tool `mcp__<server>` whose functions have `-` turned into `_`; the model's function_call
// names the function and carries the namespace.

function codexResults(body, calls) {
  return (body.input ?? []).filter((i) => i.type === "function_call_output" && calls.has(i.call_id)).map((i) => ({
    name: calls.get(i.call_id),
    text: contentText(i.output),
    // The Responses item has no error flag; an error reaches the model as text only.
    isError: undefined,
    raw: i,
  }));
}

export const codex = {
  name: "codex",
  title: "Codex CLI 0.171.0",
  elicitation: "declines",

  async startModel(steps) {
    const script = new Script(steps);
    const calls = new Map();
    let n = 0;
    const model = await startModelServer((r, res) => {
      if (r.method !== "POST" || r.path !== "/v1/responses") return false;
      n += 1;
      const id = `resp_${n}`;
      const namespace = (r.body?.tools ?? []).find((t) => t.type === "namespace" && t.name === `mcp__${SERVER}`);
      let item;
      if (!namespace) {
        r.kind = "side";
        item = { type: "message", role: "assistant", id: `msg_${n}`, content: [{ type: "output_text", text: "ok" }] };
      } else {
        r.kind = "main";
        // The results of the calls the previous step made, as this request hands them over.
        const action = script.next(r, codexResults(r.body, calls));
        calls.clear();
        if (action.text !== undefined) {
          item = { type: "message", role: "assistant", id: `msg_${n}`, content: [{ type: "output_text", text: action.text }] };
        } else {
          const fn = action.tool.replaceAll("-", "_");
          if (!namespace.tools.some((t) => t.name === fn)) script.problems.push(`${fn} not in ${namespace.name}: ${namespace.tools.map((t) => t.name)}`);
          const callId = `call_${n}`;
          calls.set(callId, action.tool);
          item = { type: "function_call", id: `fc_${n}`, call_id: callId, namespace: namespace.name, name: fn, arguments: JSON.stringify(action.args) };
        }
      }
      sendSse(res, [
        { event: "response.created", data: { type: "response.created", response: { id } } },
        { event: "response.output_item.added", data: { type: "response.output_item.added", output_index: 0, item } },
        { event: "response.output_item.done", data: { type: "response.output_item.done", output_index: 0, item } },
        { event: "response.completed", data: { type: "response.completed", response: { id, usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 } } } },
      ]);
      return true;
    });
    return { ...model, script };
  },

  offers(request, tool) {
    const namespace = (request.body.tools ?? []).find((t) => t.type === "namespace" && t.name === `mcp__${SERVER}`);
    return Boolean(namespace?.tools.some((t) => t.name === tool.replaceAll("-", "_")));
  },

  /** The `[mcp_servers.NAME]` table. */
  entry(server) {
    const lines = [`[mcp_servers.${SERVER}]`];
    if (server.stdio) {
      const { command, args, env, cwd } = server.stdio;
      lines.push(`command = ${JSON.stringify(command)}`, `args = ${JSON.stringify(args)}`, `cwd = ${JSON.stringify(cwd)}`);
      lines.push(`env = { ${Object.entries(env).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }`);
    } else {
      lines.push(`url = ${JSON.stringify(server.http.url)}`, `bearer_token_env_var = "INTERP_MCP_TOKEN"`);
    }
    // Without it `codex exec` refuses every call: "requires approval, but approval policy is never".
    lines.push(`default_tools_approval_mode = "approve"`, "startup_timeout_sec = 60", "tool_timeout_sec = 120");
    return lines.join("\n");
  },

  async run({ home, model, server, prompt, cwd, extraEnv = {} }) {
    const codexHome = ensureDir(join(home, ".codex"));
    writeFileSync(join(codexHome, "config.toml"), [
      `model = "mock-host-model"`,
      `model_provider = "mock"`,
      `check_for_update_on_startup = false`,
      ``,
      `[analytics]`,
      `enabled = false`,
      ``,
      `[model_providers.mock]`,
      `name = "mock"`,
      `base_url = "${model.origin}/v1"`,
      `env_key = "MOCK_HOST_KEY"`,
      `wire_api = "responses"`,
      `request_max_retries = 0`,
      `stream_max_retries = 0`,
      ``,
      this.entry(server),
      ``,
    ].join("\n"));
    const env = baseEnv(home, {
      CODEX_HOME: codexHome, MOCK_HOST_KEY: "mock-key",
      ...(server.http ? { INTERP_MCP_TOKEN: server.http.token } : {}), ...extraEnv,
    });
    return runHost(join(NODE_MODULES, ".bin/codex"),
      ["exec", "--json", "--skip-git-repo-check", "--ephemeral", prompt], { env, cwd });
  },

  transcript(request) {
    const namespace = request.body.tools.find((t) => t.type === "namespace" && t.name === `mcp__${SERVER}`);
    return {
      path: request.path,
      tool: { type: namespace.type, name: namespace.name, tools: namespace.tools.map((t) => ({ name: t.name, parameters: Object.keys(t.parameters?.properties ?? {}) })) },
      input: request.body.input.filter((i) => i.type === "function_call" || i.type === "function_call_output"),
    };
  },
};

// ---------------------------------------------------------------------------------------
// Claude Code: Anthropic Messages (`POST /v1/messages`, SSE), `count_tokens`; tools are
// `mcp__<server>__<tool>` (the dash kept).

function claudeEvents(block, stop, n) {
  const message = {
    id: `msg_${n}`, type: "message", role: "assistant", model: "mock-claude", content: [],
    stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 },
  };
  const events = [
    { event: "message_start", data: { type: "message_start", message } },
  ];
  if (block.type === "text") {
    events.push(
      { event: "content_block_start", data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: block.text } } },
    );
  } else {
    events.push(
      { event: "content_block_start", data: { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } } },
    );
  }
  events.push(
    { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
    { event: "message_delta", data: { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 2 } } },
    { event: "message_stop", data: { type: "message_stop" } },
  );
  return events;
}

function claudeResults(body) {
  const last = body.messages?.at(-1);
  if (last?.role !== "user" || !Array.isArray(last.content)) return [];
  const names = new Map();
  for (const m of body.messages) {
    if (m.role === "assistant" && Array.isArray(m.content)) {
      for (const c of m.content) if (c.type === "tool_use") names.set(c.id, c.name);
    }
  }
  return last.content.filter((c) => c.type === "tool_result").map((c) => ({
    name: names.get(c.tool_use_id), text: contentText(c.content), isError: c.is_error === true, raw: c,
  }));
}

export const claude = {
  name: "claude",
  title: "Claude Code 2.1.332",
  elicitation: "cancels",
  // Claude Code speaks 2026-07-28 when `server/discover` answers (approvals by MRTR);
  // this forces `initialize` (approvals by elicitation/create).
  variants: [
    { label: "stdio, legacy era", transport: "stdio", env: { MCP_PROTOCOL_NEGOTIATION: "legacy" }, approvalsOnly: true },
    { label: "http, legacy era", transport: "http", env: { MCP_PROTOCOL_NEGOTIATION: "legacy" }, approvalsOnly: true },
  ],

  async startModel(steps) {
    const script = new Script(steps);
    let n = 0;
    const model = await startModelServer((r, res) => {
      if (r.method === "POST" && r.path === "/v1/messages/count_tokens") {
        r.kind = "side";
        return sendJson(res, { input_tokens: 10 });
      }
      if (r.method !== "POST" || r.path !== "/v1/messages") return false;
      n += 1;
      const tools = r.body?.tools ?? [];
      const reply = (block, stop) => (r.body?.stream === false
        ? sendJson(res, { id: `msg_${n}`, type: "message", role: "assistant", model: "mock-claude", content: [block], stop_reason: stop, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 2 } })
        : sendSse(res, claudeEvents(block, stop, n)));
      if (!tools.some((t) => t.name?.startsWith(`mcp__${SERVER}__`))) {
        // Titles, summaries and other side requests.
        r.kind = "side";
        return reply({ type: "text", text: "ok" }, "end_turn");
      }
      r.kind = "main";
      const action = script.next(r, claudeResults(r.body));
      if (action.text !== undefined) return reply({ type: "text", text: action.text }, "end_turn");
      const name = `mcp__${SERVER}__${action.tool}`;
      if (!tools.some((t) => t.name === name)) script.problems.push(`${name} not among the tools: ${tools.map((t) => t.name)}`);
      return reply({ type: "tool_use", id: `toolu_${n}`, name, input: action.args }, "tool_use");
    });
    return { ...model, script };
  },

  offers(request, tool) {
    return (request.body.tools ?? []).some((t) => t.name === `mcp__${SERVER}__${tool}`);
  },

  /** The `--mcp-config` JSON entry. */
  entry(server) {
    if (server.stdio) {
      const { command, args, env } = server.stdio;
      return { type: "stdio", command, args, env };
    }
    return { type: "http", url: server.http.url, headers: { Authorization: `Bearer ${server.http.token}` } };
  },

  async run({ home, model, server, prompt, cwd, extraEnv = {} }) {
    const configDir = ensureDir(join(home, ".claude"));
    const mcpConfig = join(home, "mcp.json");
    writeFileSync(mcpConfig, JSON.stringify({ mcpServers: { [SERVER]: this.entry(server) } }, null, 2));
    const env = baseEnv(home, {
      CLAUDE_CONFIG_DIR: configDir,
      ANTHROPIC_BASE_URL: model.origin,
      ANTHROPIC_API_KEY: "sk-ant-mock",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      // Offer MCP tools up front instead of behind ToolSearch.
      ENABLE_TOOL_SEARCH: "false",
      MCP_TOOL_TIMEOUT: "120000",
      ...extraEnv,
    });
    const allowed = ["codex", "codex-reply", "codex-status", "codex-wait"].map((t) => `mcp__${SERVER}__${t}`).join(",");
    return runHost(join(NODE_MODULES, ".bin/claude"), [
      "-p", prompt, "--mcp-config", mcpConfig, "--strict-mcp-config", "--allowedTools", allowed,
      "--output-format", "stream-json", "--verbose",
    ], { env, cwd });
  },

  transcript(request) {
    return {
      path: request.path,
      tools: request.body.tools.filter((t) => t.name.startsWith(`mcp__${SERVER}__`))
        .map((t) => ({ name: t.name, parameters: Object.keys(t.input_schema?.properties ?? {}) })),
      messages: request.body.messages.filter((m) => Array.isArray(m.content) && m.content.some((c) => c.type === "tool_use" || c.type === "tool_result")),
    };
  },
};

export { findUuid };
