// conductor-integration: installed by `conductor integrate pi`; `conductor integrate pi --uninstall` removes it.
// Pi extension: every tool call is checked with conductor (file claims between agent sessions and,
// in a workflow worker, the workflow's damage-control rules). A held file or a rule blocks the call
// with the reason; a free file is claimed for this session and the model is told so in the tool's
// result. The session registers on session_start and releases its files on session_shutdown. Inside
// a workflow worker (CONDUCTOR_WORKFLOW_SESSION set by `conductor workflow run`) it adds the tools
// workflow_transition and workflow_update_snapshot. Plain JavaScript, so it needs no imports from Pi.
//
// Installed in Pi's user-level extensions directory (~/.pi/agent/extensions/), which Pi loads
// without a project trust prompt, it acts only where conductor was integrated: in the projects
// listed in PROJECTS (`conductor integrate pi` adds the current one), everywhere when that file
// says so (`--user`), and in every workflow worker. When conductor itself cannot run, it lets the
// call through with a visible warning; with CONDUCTOR_FAIL_CLOSED=1, or `enforce` set to
// block-foreign, require-claim, block-overlap or require-verified in conductor's config.json, it
// refuses the call and tells the model why.
import { spawnSync } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";

const CONDUCTOR = "conductor";
const PROJECTS = "";

// Pi's version, from the package of the script Pi runs (Pi renames its process, so conductor
// cannot read it from /proc): sessions record it, and an upgrade is seen.
const PI_VERSION = (() => {
  try {
    let d = dirname(realpathSync(process.argv[1]));
    for (let i = 0; i < 6; i++, d = dirname(d)) {
      const p = readJson(join(d, "package.json"));
      if (p && typeof p.name === "string" && p.name.endsWith("/pi-coding-agent")) return String(p.version);
    }
  } catch (e) {}
  return "";
})();

function run(args, input) {
  const env = PI_VERSION ? { ...process.env, CONDUCTOR_AGENT_VERSION: PI_VERSION } : process.env;
  return spawnSync(CONDUCTOR, args, { input, encoding: "utf8", timeout: 15000, env });
}

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    return null;
  }
}

// Whether conductor was integrated for `dir`: listed in PROJECTS (or everywhere), or a worker.
function inScope(dir) {
  if (process.env.CONDUCTOR_WORKFLOW_SESSION) return true;
  if (!PROJECTS) return true;
  const list = readJson(PROJECTS) || {};
  if (list.everywhere === true) return true;
  let real = dir;
  try {
    real = realpathSync(dir);
  } catch (e) {}
  return (list.projects || []).some((p) => real === p || real.startsWith(p.endsWith("/") ? p : p + "/"));
}

// Fail closed when asked to: CONDUCTOR_FAIL_CLOSED=1, or a blocking `enforce` in config.json.
function failClosed() {
  if (process.env.CONDUCTOR_FAIL_CLOSED === "1") return "CONDUCTOR_FAIL_CLOSED=1";
  const home = process.env.CONDUCTOR_HOME || join(process.env.HOME || "", ".conductor");
  const enforce = (readJson(join(home, "config.json")) || {}).enforce;
  if (["block-foreign", "require-claim", "block-overlap", "require-verified"].includes(enforce)) return `enforce = "${enforce}"`;
  return "";
}

const warned = new Set();
// A warning the user sees (stderr, and Pi's UI when there is one), not only the model.
function warn(ctx, text) {
  if (warned.has(text)) return;
  warned.add(text);
  process.stderr.write(`${text}\n`);
  try {
    if (ctx && ctx.hasUI && ctx.ui && ctx.ui.notify) ctx.ui.notify(text, "warning");
  } catch (e) {}
}

function hook(payload, ctx) {
  const r = run(["hook", "pi"], JSON.stringify(payload));
  let why = "";
  let answer = null;
  if (r.error) why = r.error.code === "ETIMEDOUT" ? "it timed out after 15 s" : r.error.message;
  else if (r.status !== 0) why = `exit ${r.status}: ${(r.stderr || "").trim()}`;
  else {
    try {
      answer = JSON.parse((r.stdout || "").trim() || "{}");
    } catch (e) {
      why = `its answer is not JSON: ${(r.stdout || "").trim().slice(0, 200)}`;
    }
  }
  if (answer) return answer;
  const closed = failClosed();
  if (closed) {
    const reason = `conductor could not run (${CONDUCTOR}: ${why}); with ${closed} every tool call is refused until it runs again`;
    warn(ctx, `conductor: ${reason}`);
    return { decision: "deny", reason };
  }
  const notice = `conductor: the hook could not run (${CONDUCTOR}: ${why}); edits are NOT checked against other sessions' claims`;
  warn(ctx, notice);
  return { decision: "allow", context: notice };
}

function worker(args) {
  const r = run(args);
  const text = `${r.stdout || ""}${r.stderr || ""}`.trim();
  if (r.error || r.status !== 0) throw new Error(text || (r.error && r.error.message) || "conductor failed");
  return { content: [{ type: "text", text: text || "ok" }], details: { exitCode: r.status } };
}

const strings = (description) => ({ type: "array", items: { type: "string" }, description });

export default function conductor(pi) {
  let sessionId = "";
  let cwd = process.cwd();
  const notes = new Map();
  // Whether this session's directory uses conductor; outside one every handler does nothing.
  const active = () => inScope(cwd);
  const know = (ctx) => {
    try {
      sessionId = (ctx && ctx.sessionManager && ctx.sessionManager.getSessionId()) || sessionId;
    } catch (e) {}
    if (ctx && ctx.cwd) cwd = ctx.cwd;
  };
  const send = (event, ctx, extra = {}) =>
    hook({ hook_event_name: event, session_id: sessionId, cwd, ...extra }, ctx);

  pi.on("session_start", async (_event, ctx) => {
    know(ctx);
    if (!active()) return undefined;
    const a = send("session_start", ctx);
    if (a.context) return { systemPromptAppend: a.context };
  });

  pi.on("tool_call", async (event, ctx) => {
    know(ctx);
    if (!active()) return undefined;
    const a = send("tool_call", ctx, { tool_name: event.toolName, tool_input: event.input || {} });
    if (a.decision === "ask" && ctx && ctx.hasUI && ctx.ui && (await ctx.ui.confirm("conductor", a.reason || ""))) {
      return undefined;
    }
    if (a.decision === "deny" || a.decision === "ask") {
      return { block: true, reason: a.reason || "conductor refused this tool call" };
    }
    if (a.context) notes.set(event.toolCallId, a.context);
    return undefined;
  });

  pi.on("tool_result", async (event, ctx) => {
    know(ctx);
    if (!active()) return undefined;
    const a = send("tool_result", ctx, { tool_name: event.toolName });
    const note = [...new Set([notes.get(event.toolCallId), a.context].filter(Boolean))].join("\n");
    notes.delete(event.toolCallId);
    if (note) return { content: [...(event.content || []), { type: "text", text: note }] };
    return undefined;
  });

  pi.on("session_shutdown", async (event, ctx) => {
    know(ctx);
    if (event && event.reason === "reload") return; // the same session goes on
    if (!active()) return;
    send("session_shutdown", ctx, { reason: (event && event.reason) || "" });
  });

  if (process.env.CONDUCTOR_WORKFLOW_SESSION) {
    pi.registerTool({
      name: "workflow_transition",
      label: "Workflow transition",
      description:
        "Finish the current workflow state: move to the state `target` (or `done` to finish the workflow), " +
        "with a summary of what this state achieved for the next workers.",
      parameters: {
        type: "object",
        properties: {
          target: { type: "string", description: "The next state, or done" },
          summary: { type: "string", description: "What this state achieved" },
        },
        required: ["target", "summary"],
      },
      async execute(_id, params) {
        return worker(["workflow", "transition", String(params.target), "--summary", String(params.summary)]);
      },
    });
    pi.registerTool({
      name: "workflow_update_snapshot",
      label: "Workflow snapshot",
      description:
        "Record findings, files this state modified, pending tasks, or KEY=VALUE facts for the later states of the workflow.",
      parameters: {
        type: "object",
        properties: {
          findings: strings("Key findings"),
          files: strings("Files this state modified"),
          pending: strings("Tasks left for later states"),
          set: strings("KEY=VALUE facts"),
        },
      },
      async execute(_id, params) {
        const args = ["workflow", "snapshot"];
        const add = (flag, list) => (list || []).forEach((v) => args.push(flag, String(v)));
        add("--finding", params.findings);
        add("--file", params.files);
        add("--pending", params.pending);
        add("--set", params.set);
        return worker(args);
      },
    });
  }
}
