// conductor-integration: installed by `conductor integrate pi`; `conductor integrate pi --uninstall` removes it.
// Pi extension: every tool call is checked with conductor (file claims between agent sessions and,
// in a workflow worker, the workflow's damage-control rules). A held file or a rule blocks the call
// with the reason; a free file is claimed for this session and the model is told so in the tool's
// result. The session registers on session_start and releases its files on session_shutdown. Inside
// a workflow worker (CONDUCTOR_WORKFLOW_SESSION set by `conductor workflow run`) it adds the tools
// workflow_transition and workflow_update_snapshot. Plain JavaScript, so it needs no imports from Pi.
import { spawnSync } from "node:child_process";

const CONDUCTOR = "conductor";

function run(args, input) {
  return spawnSync(CONDUCTOR, args, { input, encoding: "utf8", timeout: 15000 });
}

function hook(payload) {
  const r = run(["hook", "pi"], JSON.stringify(payload));
  if (r.error || r.status !== 0) {
    const why = r.error ? r.error.message : `exit ${r.status}: ${(r.stderr || "").trim()}`;
    return { decision: "allow", notice: `conductor: the hook failed (${why}); edits are not checked` };
  }
  try {
    return JSON.parse((r.stdout || "").trim() || "{}");
  } catch (e) {
    return { decision: "allow" };
  }
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
  const know = (ctx) => {
    try {
      sessionId = (ctx && ctx.sessionManager && ctx.sessionManager.getSessionId()) || sessionId;
    } catch (e) {}
    if (ctx && ctx.cwd) cwd = ctx.cwd;
  };
  const send = (event, extra = {}) => hook({ hook_event_name: event, session_id: sessionId, cwd, ...extra });

  pi.on("session_start", async (_event, ctx) => {
    know(ctx);
    const a = send("session_start");
    if (a.context) return { systemPromptAppend: a.context };
  });

  pi.on("tool_call", async (event, ctx) => {
    know(ctx);
    const a = send("tool_call", { tool_name: event.toolName, tool_input: event.input || {} });
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
    const a = send("tool_result", { tool_name: event.toolName });
    const note = [notes.get(event.toolCallId), a.context].filter(Boolean).join("\n");
    notes.delete(event.toolCallId);
    if (note) return { content: [...(event.content || []), { type: "text", text: note }] };
    return undefined;
  });

  pi.on("session_shutdown", async (event, ctx) => {
    know(ctx);
    if (event && event.reason === "reload") return; // the same session goes on
    send("session_shutdown", { reason: (event && event.reason) || "" });
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
