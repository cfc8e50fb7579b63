//! The tools an agent sees: names, descriptions, and input schemas derived by `schemars` from the
//! argument types of `args` (the types each call is parsed into).
//!
//! Not rmcp's `#[tool_router]`/`#[tool]` macros: their `Parameters<T>` answers arguments that do
//! not parse with a JSON-RPC `invalid_params` error, where these tools answer an `isError` result
//! worded as the CLI words it (`error:` and `hint:` lines, a `reason`) that an agent acts on. The
//! schema is derived all the same; only the table below is written out.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Map;

use super::args::*;
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

type Call = Box<dyn Fn(&Tools, &Ctx, Value, &Cancel) -> Result<Answer> + Send + Sync>;

/// One tool: its name, its description, the type its arguments parse into (which gives its
/// schema) and its handler.
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    schema: fn() -> Value,
    /// Fields of a domain request that this face sets itself (the session acting): they are
    /// left out of the schema and refused in a call.
    withheld: &'static [&'static str],
    call: Call,
}

impl ToolDef {
    /// The input schema, as listed by `tools/list`.
    pub fn input_schema(&self) -> Value {
        let mut s = (self.schema)();
        if let Some(p) = s.get_mut("properties").and_then(Value::as_object_mut) {
            for w in self.withheld {
                p.shift_remove(*w);
            }
        }
        if let Some(r) = s.get_mut("required").and_then(Value::as_array_mut) {
            r.retain(|n| !self.withheld.iter().any(|w| n == w));
        }
        s
    }

    /// Parse the arguments into the tool's type and run it.
    pub fn call(&self, tools: &Tools, ctx: &Ctx, v: Value, cancel: &Cancel) -> Result<Answer> {
        if let Some(w) = self.withheld.iter().find(|w| v.get(**w).is_some()) {
            return Err(Error::invalid(
                Reason::InvalidInput,
                format!(
                    "invalid {} arguments: unknown field `{w}` (the server acts as this agent's session)",
                    self.name
                ),
            ));
        }
        (self.call)(tools, ctx, v, cancel)
    }
}

fn tool<A: JsonSchema + DeserializeOwned + 'static>(
    name: &'static str,
    description: &'static str,
    withheld: &'static [&'static str],
    f: fn(&Tools, &Ctx, A, &Cancel) -> Result<Answer>,
) -> ToolDef {
    ToolDef {
        name,
        description,
        schema: schema::<A>,
        withheld,
        call: Box::new(move |t: &Tools, ctx: &Ctx, v: Value, cancel: &Cancel| {
            f(t, ctx, args(name, v)?, cancel)
        }),
    }
}

/// Every tool, in listing order.
pub fn catalog() -> Vec<ToolDef> {
    vec![
        tool(
            "status",
            "Live sessions, their tasks and claimed files, conflicts; `you` is this session's instance.",
            &[],
            |t, ctx, a: StatusArgs, _| t.status(ctx, a),
        ),
        tool(
            "start",
            "State this session's task (runs the priority gate).",
            &[],
            |t, ctx, a: StartArgs, _| t.start(ctx, a),
        ),
        tool(
            "claim",
            "Claim files before editing them. Held files come back as an error naming the holder; wait_seconds waits for their release.",
            &["instance_id"],
            |t, ctx, a: ClaimArgs, cancel| t.claim(ctx, a, cancel),
        ),
        tool(
            "release",
            "Release claimed files (or all) without finishing the task.",
            &["instance_id", "force"],
            |t, ctx, a: ReleaseRequest, _| t.release(ctx, a),
        ),
        tool(
            "done",
            "Finish the task: recorded in history, every claim released.",
            &[],
            |t, ctx, a: DoneArgs, _| t.done(ctx, a),
        ),
        tool(
            "check",
            "Who holds these paths, and may this session edit them?",
            &[],
            |t, ctx, a: FilesArgs, _| t.check(ctx, a),
        ),
        tool(
            "events",
            "Journal events after a seq, optionally of some types.",
            &[],
            |t, ctx, a: EventsArgs, _| t.events(ctx, a),
        ),
        tool(
            "inbox",
            "An agent's actionable inbox items.",
            &[],
            |t, ctx, a: InboxArgs, _| t.inbox(ctx, a),
        ),
        tool(
            "inbox_act",
            "Mark an inbox item seen, complete it (completion_ref required) or skip it.",
            &[],
            |t, ctx, a: InboxActArgs, _| t.inbox_act(ctx, a),
        ),
        tool(
            "post",
            "Post in a channel; @agent mentions reach their inboxes.",
            &[],
            |t, ctx, a: PostArgs, _| t.post(ctx, a),
        ),
        tool(
            "dm",
            "Write to an agent directly (lands in its inbox).",
            &[],
            |t, ctx, a: DmArgs, _| t.dm(ctx, a),
        ),
        tool(
            "workflow_transition",
            "Finish this worker's workflow state: move to TARGET (or done).",
            &[],
            |t, ctx, a: TransitionArgs, _| t.transition(ctx, a),
        ),
        tool(
            "workflow_update_snapshot",
            "Record findings, files, pending tasks or values for later workflow states.",
            &[],
            |t, ctx, a: SnapshotArgs, _| t.snapshot(ctx, a),
        ),
        tool(
            "queue_submit",
            "Submit a job-queue manifest ({workspace, jobs}).",
            &[],
            |t, ctx, a: SubmitArgs, _| t.queue_submit(ctx, a),
        ),
        tool(
            "queue_status",
            "Jobs and their states (a workspace's, archived ones included).",
            &[],
            |t, ctx, a: QueueStatusArgs, _| t.queue_status(ctx, a),
        ),
    ]
}

/// `A`'s input schema (what its `Deserialize` accepts), inlined and without what only costs
/// the agent characters (see [`compact`]).
fn schema<A: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut v = settings
        .into_generator()
        .into_root_schema_for::<A>()
        .to_value();
    if let Some(o) = v.as_object_mut() {
        // The type's own name and doc comment: for the reader of the code.
        o.shift_remove("title");
        o.shift_remove("description");
        // Listed even when empty (`status`), as clients that read `properties` expect.
        o.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    compact(&mut v);
    v
}

/// Drop from a derived schema what says nothing an agent needs, or says it at length:
/// - `title`, `format` (`uint64`: the `minimum` says it), `default`, `additionalProperties`
///   that is `false` (the server refuses unknown fields in any case) or `true` (the default);
/// - `null` as an option's alternative (`Option` fields are optional, a `null` is read as absent);
/// - a closed set of names written as `oneOf` of `const`s (with each variant's doc comment)
///   becomes the `enum` of the names, with neither `type` nor description beside it.
fn compact(v: &mut Value) {
    let Value::Object(o) = v else { return };
    for k in ["title", "format", "default"] {
        o.shift_remove(k);
    }
    if o.get("additionalProperties").is_some_and(Value::is_boolean) {
        o.shift_remove("additionalProperties");
    }
    // `"type": ["string", "null"]` -> `"type": "string"`.
    if let Some(Value::Array(ts)) = o.get_mut("type") {
        ts.retain(|t| t != "null");
        if ts.len() == 1 {
            let t = ts.remove(0);
            o.insert("type".into(), t);
        }
    }
    // `anyOf: [X, {"type": "null"}]` -> X.
    for k in ["anyOf", "oneOf"] {
        let alone = o.get(k).and_then(Value::as_array).and_then(|a| {
            let rest: Vec<&Value> = a.iter().filter(|s| s["type"] != "null").collect();
            (a.len() == 2 && rest.len() == 1).then(|| rest[0].clone())
        });
        if let Some(Value::Object(inner)) = alone {
            o.shift_remove(k);
            for (ik, iv) in inner {
                o.entry(ik).or_insert(iv);
            }
        }
    }
    // `oneOf: [{"const": "P1", "description": ...}, ...]` -> `enum: ["P1", ...]`.
    let names = o.get("oneOf").and_then(Value::as_array).and_then(|a| {
        a.iter()
            .map(|s| s.get("const").or_else(|| one_name(s)).cloned())
            .collect::<Option<Vec<Value>>>()
    });
    if let Some(names) = names {
        o.shift_remove("oneOf");
        o.insert("enum".into(), Value::Array(names));
    }
    if let Some(Value::Array(names)) = o.get_mut("enum") {
        names.retain(|n| !n.is_null());
        o.shift_remove("type");
        o.shift_remove("description");
    }
    // Subschemas: each property's, an array's items, a map's values, the alternatives.
    if let Some(Value::Object(props)) = o.get_mut("properties") {
        props.values_mut().for_each(compact);
    }
    for k in ["items", "additionalProperties"] {
        if let Some(s) = o.get_mut(k) {
            compact(s);
        }
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(a)) = o.get_mut(k) {
            a.iter_mut().for_each(compact);
        }
    }
}

/// The one name of `{"enum": [NAME]}` (how schemars may write a variant).
fn one_name(s: &Value) -> Option<&Value> {
    match s.get("enum").and_then(Value::as_array) {
        Some(a) if a.len() == 1 => a.first(),
        _ => None,
    }
}
