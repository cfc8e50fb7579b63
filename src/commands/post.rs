//! `conductor post`, `dm`, `edit` and `messages`: channel messages. A post that addresses
//! agents creates their mentions and inbox items in the same transaction.

use std::io::Read;

use clap::Args;
use serde_json::json;

use super::agent::Out;
use super::{Ctx, print};
use conductor::agents::{self, Priority, ops};
use conductor::error::Reason;
use conductor::error::{Error, Result};

/// `post`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "The text addresses agents by handle (`@scout`, Canopy's rule: letters, digits, \
`_ . -`, not ending in `.` or `-`) or on an assignment line (`owner: scout`; also to:, next:, assignee:, \
reviewer:, members:). Each addressed agent gets a mention and an inbox item, written together with the \
post. A reply to an agent's message lands in that agent's inbox too (trigger `reply`).\n\nPosts are at \
most 16384 bytes (reason `post_too_large`, exit 2).\n\nExamples:\n  conductor post ops \"@scout please \
summarize the failing tests\"\n  printf 'owner: scout\\nfix the build\\n' | conductor post ops - --as ana"
)]
pub struct PostArgs {
    /// The channel (created on first post; a leading `#` is dropped).
    pub channel: String,
    /// The text, or `-` to read it from stdin.
    pub text: String,
    /// Post as this name [default: $CONDUCTOR_AS, else $USER].
    #[arg(long = "as", value_name = "NAME")]
    pub author: Option<String>,
    /// Reply to this message (its author, if an agent, gets an inbox item).
    #[arg(long, value_name = "MESSAGE_ID")]
    pub reply_to: Option<String>,
    /// Priority of the inbox items the post creates.
    #[arg(long, value_enum, default_value_t = Priority::Normal)]
    pub priority: Priority,
}

/// `dm`.
#[derive(Debug, Args)]
#[command(after_long_help = "Example:\n  conductor dm scout \"can you take the release notes?\"")]
pub struct DmArgs {
    /// The agent to write to.
    pub agent: String,
    /// The text, or `-` to read it from stdin.
    pub text: String,
    /// Send as this name [default: $CONDUCTOR_AS, else $USER].
    #[arg(long = "as", value_name = "NAME")]
    pub author: Option<String>,
    /// Priority of the inbox item.
    #[arg(long, value_enum, default_value_t = Priority::High)]
    pub priority: Priority,
}

/// `edit`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Only the author can edit. Agents the new text addresses for the first time \
get a mention and an inbox item (deduplicated by agent + message + trigger)."
)]
pub struct EditArgs {
    /// The message to edit.
    pub message_id: String,
    /// The new text, or `-` to read it from stdin.
    pub text: String,
    /// Edit as this name [default: $CONDUCTOR_AS, else $USER].
    #[arg(long = "as", value_name = "NAME")]
    pub author: Option<String>,
}

/// `messages`.
#[derive(Debug, Args)]
pub struct MessagesArgs {
    /// The channel (or a DM conversation id like dm:ana+scout).
    pub channel: String,
    /// The newest N messages.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub limit: u64,
}

pub use crate::face::author;

/// The text, from stdin when `-`.
pub fn text(t: String) -> Result<String> {
    if t != "-" {
        return Ok(t);
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(agents::MAX_POST_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", std::path::Path::new("stdin"), e))?;
    if bytes.len() > agents::MAX_POST_BYTES {
        // Too large either way (the cut may split a character): the size check says so.
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    String::from_utf8(bytes).map_err(|e| {
        Error::invalid(
            Reason::InvalidInput,
            format!(
                "the text on stdin is not UTF-8 (byte {} is not)",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn posted(ctx: &Ctx, m: &agents::Message) -> Result<u8> {
    let text = format!(
        "Posted {} in {}{}",
        m.message_id,
        m.channel_id,
        if m.addressed.is_empty() {
            String::new()
        } else {
            format!(" (inbox: {})", m.addressed.join(", "))
        }
    );
    print(
        ctx.out,
        &Out::ok(json!({"status": "ok", "message": m}), text),
    )
}

/// Run `post`.
pub fn run_post(ctx: &Ctx, a: PostArgs) -> Result<u8> {
    let content = text(a.text)?;
    let m = agents::service::post(
        &ctx.store,
        ctx.now,
        ops::NewPost {
            channel: a.channel,
            author: author(a.author),
            content,
            reply_to: a.reply_to,
            priority: a.priority,
            dm: false,
        },
    )?;
    posted(ctx, &m)
}

/// Run `dm`.
pub fn run_dm(ctx: &Ctx, a: DmArgs) -> Result<u8> {
    let content = text(a.text)?;
    let m = agents::service::post(
        &ctx.store,
        ctx.now,
        ops::NewPost {
            channel: a.agent,
            author: author(a.author),
            content,
            reply_to: None,
            priority: a.priority,
            dm: true,
        },
    )?;
    posted(ctx, &m)
}

/// Run `edit`.
pub fn run_edit(ctx: &Ctx, a: EditArgs) -> Result<u8> {
    let content = text(a.text)?;
    let who = author(a.author);
    let m = agents::service::edit(&ctx.store, ctx.now, &a.message_id, &who, content)?;
    print(
        ctx.out,
        &Out::ok(
            json!({"status": "ok", "message": m}),
            format!("Edited {} in {}", m.message_id, m.channel_id),
        ),
    )
}

/// Run `messages`.
pub fn run_messages(ctx: &Ctx, a: MessagesArgs) -> Result<u8> {
    let (id, msgs) = agents::views::messages(&ctx.store, ctx.now, &a.channel, a.limit as usize)?;
    let mut text = String::new();
    for m in &msgs {
        text.push_str(&format!(
            "{} {} {}{}: {}\n",
            m.message_id,
            m.created_at,
            m.author,
            if m.edited_at.is_some() {
                " (edited)"
            } else {
                ""
            },
            m.content.replace('\n', "\n    ")
        ));
    }
    if msgs.is_empty() {
        text = "No messages".into();
    }
    print(
        ctx.out,
        &Out::ok(
            json!({"status": "ok", "channel_id": id, "messages": msgs}),
            text,
        ),
    )
}
