//! `conductor mcp`: a stdio MCP server (the official Rust SDK, `rmcp`) whose tools are thin
//! calls into the library. Its async runtime starts here and nowhere else: every other command
//! stays synchronous.
//!
//! The server acts as the agent's session ([`identity`]). An instance it had to register itself
//! is finished when the client disconnects (stdin closes), on SIGTERM/SIGINT/SIGHUP, or when the
//! agent's process (our parent) goes away; it also records that process as its owner, so even a
//! SIGKILLed server leaves nothing `cleanup` would not reap.

pub mod identity;
pub mod resources;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};

use crate::face::Ctx;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use resources::Subscriptions;
use tools::{Answer, Cancel, Tools};

/// Serve conductor's tools over MCP on stdin/stdout.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Tools offered by default: status, start, claim, release, done, check, events, \
inbox, inbox_act, post, dm. With --tools all also workflow_transition, workflow_update_snapshot, \
queue_submit, queue_status; or name the tools, comma-separated.\n\n\
Resources (subscribable; updates are sent when the journal shows a change): conductor://status, \
conductor://inbox/{agent}, conductor://workflow/{session}/snapshot.\n\n\
The server acts as the agent's session: the instance its hooks registered for CLAUDE_CODE_SESSION_ID, \
else CONDUCTOR_INSTANCE_ID, else --instance. With none of these it registers its own instance on the \
first call that needs one (owner: the agent's process) and finishes it when the client disconnects \
or the agent exits.\n\nSet up by `conductor integrate AGENT`, e.g. in .mcp.json:\n  \
{\"mcpServers\": {\"conductor\": {\"command\": \"conductor\", \"args\": [\"mcp\"]}}}"
)]
pub struct McpArgs {
    /// The tools to offer: `default`, `all`, or names (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default",
        value_name = "TOOLS"
    )]
    pub tools: Vec<String>,
    /// Act as this instance when neither the agent's session nor CONDUCTOR_INSTANCE_ID names one.
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
    /// The agent-runtime name used by inbox, inbox_act, post and dm [default: $CONDUCTOR_AGENT].
    #[arg(long, env = "CONDUCTOR_AGENT", value_name = "NAME")]
    pub agent: Option<String>,
}

/// The tools `--tools` selects, in catalog order, with their derived input schemas.
pub fn selected(names: &[String]) -> Result<Vec<Tool>> {
    let catalog = tools::catalog();
    let mut want: Vec<&str> = Vec::new();
    for n in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        match n {
            "default" => want.extend(tools::DEFAULT),
            "all" => want.extend(catalog.iter().map(|t| t.name)),
            n if catalog.iter().any(|t| t.name == n) => want.push(n),
            n => {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!(
                        "unknown tool `{}` (known: default, all, {})",
                        conductor::text::printable(n),
                        catalog
                            .iter()
                            .map(|t| t.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    Ok(catalog
        .iter()
        .filter(|t| want.contains(&t.name))
        .map(|t| {
            let serde_json::Value::Object(schema) = t.input_schema() else {
                unreachable!("schemas are objects")
            };
            Tool::new(t.name, t.description, schema)
        })
        .collect())
}

#[derive(Clone)]
struct Server {
    tools: Arc<Tools>,
    offered: Arc<Vec<Tool>>,
    subs: Arc<Subscriptions>,
}

/// A library error as an MCP error (resources have no `isError` result to carry it).
fn mcp_error(e: Error) -> McpError {
    match e.reason() {
        "invalid_input" | "unknown_agent" | "unknown_session" => {
            McpError::resource_not_found(e.to_string(), None)
        }
        _ => McpError::internal_error(e.to_string(), None),
    }
}

/// Run `f` on the runtime's blocking pool (every library call reads files).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> std::result::Result<T, McpError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
        .map_err(mcp_error)
}

fn result(a: Answer) -> CallToolResult {
    let mut r = if a.error {
        CallToolResult::error(vec![ContentBlock::text(a.text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(a.text)])
    };
    r.structured_content = Some(a.json);
    r
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("conductor", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "conductor coordinates the agents working in this project. Claim files before \
                 editing them; a file another session holds is refused (the error names the \
                 holder). Call done when the task is finished.",
        )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.offered.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.offered.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        if !self.offered.iter().any(|t| t.name == req.name) {
            return Err(McpError::invalid_params(
                format!("unknown tool `{}`", req.name),
                None,
            ));
        }
        let tools = self.tools.clone();
        let name = req.name.to_string();
        let args = serde_json::Value::Object(req.arguments.unwrap_or_default());
        let cancel = Cancel::default();
        let theirs = cancel.clone();
        let mut call = tokio::task::spawn_blocking(move || tools.call(&name, args, &theirs));
        let answer = tokio::select! {
            a = &mut call => a,
            // notifications/cancelled: a waiting claim leaves its queue; the answer is dropped.
            _ = ctx.ct.cancelled() => {
                cancel.cancel();
                call.await
            }
        }
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(result(answer).into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, McpError> {
        let tools = self.tools.clone();
        let list = blocking(move || resources::list(&tools)).await?;
        Ok(ListResourcesResult::with_all_items(list))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        req: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, McpError> {
        let tools = self.tools.clone();
        let uri = req.uri.clone();
        let text = blocking(move || resources::read(&tools, &uri)).await?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, req.uri).with_mime_type("application/json"),
        ])
        .into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        req: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        let (tools, subs) = (self.tools.clone(), self.subs.clone());
        let rt = tokio::runtime::Handle::current();
        blocking(move || subs.subscribe(&tools, &req.uri, ctx.peer, rt)).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        req: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        self.subs.unsubscribe(&req.uri);
        Ok(())
    }
}

/// Run `conductor mcp` until the client disconnects or the agent goes away.
pub fn run(ctx: &Ctx, args: McpArgs) -> Result<u8> {
    let offered = selected(&args.tools)?;
    let tools = Arc::new(Tools {
        dir: ctx.store.home().dir().to_path_buf(),
        lock_timeout: ctx.store.lock_timeout(),
        identity: identity::Identity::from_env(args.instance),
        agent: args.agent.filter(|a| !a.is_empty()),
    });
    let server = Server {
        tools: tools.clone(),
        offered: Arc::new(offered),
        subs: Arc::default(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Error::io(
                "start the MCP server's runtime",
                std::path::Path::new("tokio"),
                e,
            )
        })?;
    let owner = tools.identity.owner_pid;
    let served: std::result::Result<(), String> = rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
        let running = match server.serve(rmcp::transport::stdio_pipes()).await {
            Ok(r) => r,
            // The client went away before the handshake finished: nothing to serve.
            Err(
                rmcp::service::ServerInitializeError::ConnectionClosed(_)
                | rmcp::service::ServerInitializeError::TransportError { .. }
                | rmcp::service::ServerInitializeError::Cancelled,
            ) => return Ok(()),
            // It spoke, but not the MCP handshake (its first message was not `initialize`).
            Err(e) => return Err(format!("the MCP handshake failed: {e}")),
        };
        let parent_gone = async {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                if std::os::unix::process::parent_id() != owner {
                    return;
                }
            }
        };
        tokio::select! {
            _ = running.waiting() => {}
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
            _ = parent_gone => {}
        }
        Ok(())
    });
    // The blocking stdin reader cannot be joined; the process exits right after this.
    rt.shutdown_background();
    let store = tools.store()?;
    tools.identity.finish_own(&store)?;
    if let Err(e) = served {
        return Err(Error::invalid(Reason::McpFailed, e).with_hint(
            "`conductor mcp` is started by an MCP client (see `conductor integrate`), which opens \
             with an `initialize` request",
        ));
    }
    Ok(0)
}
