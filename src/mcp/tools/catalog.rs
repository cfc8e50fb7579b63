//! The tools an agent sees: names, descriptions and input schemas.

use super::*;

/// The longest `claim` waits (`wait_seconds`): MCP clients time requests out.
pub const MAX_WAIT_SECONDS: u64 = 600;

/// Tools offered without `--tools`.
pub const DEFAULT: &[&str] = &[
    "status",
    "start",
    "claim",
    "release",
    "done",
    "check",
    "events",
    "inbox",
    "inbox_act",
    "post",
    "dm",
];

/// Every tool: name, description, input schema.
pub fn catalog() -> Vec<(&'static str, &'static str, Value)> {
    let files = json!({"type": "array", "items": {"type": "string"}, "minItems": 1});
    vec![
        (
            "status",
            "Live sessions, their tasks and claimed files, conflicts; `you` is this session's instance.",
            json!({"type": "object", "properties": {}}),
        ),
        (
            "start",
            "State this session's task (runs the priority gate).",
            json!({"type": "object", "properties": {
             "task": {"type": "string"}, "priority": {"enum": ["P1", "P2", "P3"]},
             "project": {"type": "string"}, "override": {"type": "string", "description": "why to proceed past the gate"}},
             "required": ["task"]}),
        ),
        (
            "claim",
            "Claim files before editing them. Held files come back as an error naming the holder; wait_seconds waits for their release.",
            json!({"type": "object", "properties": {
             "files": files, "force": {"type": "string", "description": "take held files over, logging this reason"},
             "wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS}},
             "required": ["files"]}),
        ),
        (
            "release",
            "Release claimed files (or all) without finishing the task.",
            json!({"type": "object", "properties": {"files": files, "all": {"type": "boolean"}, "reason": {"type": "string"}}}),
        ),
        (
            "done",
            "Finish the task: recorded in history, every claim released.",
            json!({"type": "object", "properties": {
             "outcome": {"enum": ["success", "abandoned", "conflict"]},
             "files_modified": {"type": "array", "items": {"type": "string"}}, "notes": {"type": "string"}}}),
        ),
        (
            "check",
            "Who holds these paths, and may this session edit them?",
            json!({"type": "object", "properties": {"files": files}, "required": ["files"]}),
        ),
        (
            "events",
            "Journal events after a seq, optionally of some types.",
            json!({"type": "object", "properties": {
             "after": {"type": "integer", "minimum": 0}, "types": {"type": "array", "items": {"type": "string"}},
             "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}}),
        ),
        (
            "inbox",
            "An agent's actionable inbox items.",
            json!({"type": "object", "properties": {"agent": {"type": "string"}}}),
        ),
        (
            "inbox_act",
            "Mark an inbox item seen, complete it (completion_ref required) or skip it.",
            json!({"type": "object", "properties": {
             "id": {"type": "string"}, "action": {"enum": ["seen", "complete", "skip"]},
             "completion_ref": {"type": "object", "additionalProperties": {"type": "string"}},
             "agent": {"type": "string"}},
             "required": ["id", "action"]}),
        ),
        (
            "post",
            "Post in a channel; @agent mentions reach their inboxes.",
            json!({"type": "object", "properties": {
             "channel": {"type": "string"}, "text": {"type": "string"}, "reply_to": {"type": "string"},
             "priority": {"enum": ["low", "normal", "high", "urgent"]}},
             "required": ["channel", "text"]}),
        ),
        (
            "dm",
            "Write to an agent directly (lands in its inbox).",
            json!({"type": "object", "properties": {
             "agent": {"type": "string"}, "text": {"type": "string"},
             "priority": {"enum": ["low", "normal", "high", "urgent"]}},
             "required": ["agent", "text"]}),
        ),
        (
            "workflow_transition",
            "Finish this worker's workflow state: move to TARGET (or done).",
            json!({"type": "object", "properties": {
             "target": {"type": "string"}, "summary": {"type": "string"}, "session": {"type": "string"}},
             "required": ["target", "summary"]}),
        ),
        (
            "workflow_update_snapshot",
            "Record findings, files, pending tasks or values for later workflow states.",
            json!({"type": "object", "properties": {
             "findings": {"type": "array", "items": {"type": "string"}},
             "files": {"type": "array", "items": {"type": "string"}},
             "pending": {"type": "array", "items": {"type": "string"}},
             "set": {"type": "object", "additionalProperties": {"type": "string"}},
             "session": {"type": "string"}}}),
        ),
        (
            "queue_submit",
            "Submit a job-queue manifest ({workspace, jobs}).",
            json!({"type": "object", "properties": {"manifest": {"type": "object"}}, "required": ["manifest"]}),
        ),
        (
            "queue_status",
            "Jobs and their states (a workspace's, archived ones included).",
            json!({"type": "object", "properties": {"workspace": {"type": "string"}, "all": {"type": "boolean"}}}),
        ),
    ]
}
