// conductor-integration: installed by `conductor integrate opencode`; `conductor integrate opencode --uninstall` removes it.
// OpenCode plugin: every tool call of this session is checked with conductor (file claims between
// agent sessions). A write of a file another live session holds is refused (the error's message
// reaches the model); a free file is claimed for this session, and the model is told so in the
// tool's output. Sessions register on session.created and release their files when deleted or when
// OpenCode exits; session.idle and tool calls keep the heartbeat.
import { spawnSync } from "node:child_process";

const CONDUCTOR = "conductor";

function hook(payload) {
  const r = spawnSync(CONDUCTOR, ["hook", "opencode"], {
    input: JSON.stringify(payload),
    encoding: "utf8",
    timeout: 15000,
  });
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

export const ConductorPlugin = async ({ directory } = {}) => {
  const cwd = directory || process.cwd();
  const live = new Set();
  const notes = new Map();
  const send = (event, sessionID, extra = {}) =>
    hook({ hook_event_name: event, session_id: sessionID || "", cwd, ...extra });
  const end = (event, id) => {
    if (live.delete(id)) send(event, id);
  };
  process.once("exit", () => {
    for (const id of [...live]) end("exit", id);
  });
  return {
    "tool.execute.before": async (input, output) => {
      live.add(input.sessionID);
      const a = send("tool.execute.before", input.sessionID, {
        tool_name: input.tool,
        tool_input: (output && output.args) || {},
      });
      if (a.decision === "deny" || a.decision === "ask") {
        throw new Error(a.reason || "conductor refused this tool call");
      }
      if (a.context) notes.set(input.callID, a.context);
    },
    "tool.execute.after": async (input, output) => {
      const a = send("tool.execute.after", input.sessionID, { tool_name: input.tool });
      const note = [notes.get(input.callID), a.context].filter(Boolean).join("\n");
      notes.delete(input.callID);
      if (note && output && typeof output.output === "string") output.output += `\n\n${note}`;
    },
    event: async ({ event }) => {
      const p = (event && event.properties) || {};
      const id = p.sessionID || (p.info && p.info.id);
      if (!id) return;
      if (event.type === "session.created") {
        live.add(id);
        send("session.created", id);
      } else if (event.type === "session.idle") {
        send("session.idle", id);
      } else if (event.type === "session.deleted") {
        end("session.deleted", id);
      }
    },
  };
};
