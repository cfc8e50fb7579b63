//! `conductor workflow templates`: the templates a `workflow start` can name.

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::Result;
use conductor::workflows::template;

/// List workflow templates.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Templates are looked up in the project's .conductor/workflows/NAME.json, \
then in the home's workflows/NAME.json; a project template shadows a home template of the same name. \
Invalid templates are listed with their first problem (see `conductor workflow validate FILE`)."
)]
pub struct TemplatesArgs {
    /// The project directory [default: the current directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<std::path::PathBuf>,
}

/// Run `workflow templates`.
pub fn run(ctx: &Ctx, args: TemplatesArgs) -> Result<u8> {
    let project = crate::commands::start::working_directory(args.dir.as_deref())?;
    let found = template::list(std::path::Path::new(&project), ctx.store.home().dir());
    let mut items = Vec::new();
    let mut text = String::new();
    for (name, path, shadowed) in &found {
        let loaded = template::load(path);
        let (title, states, problem) = match &loaded {
            Ok(t) => (
                t.name.clone(),
                t.states.keys().cloned().collect::<Vec<_>>(),
                None,
            ),
            Err(e) => (String::new(), Vec::new(), Some(e.to_string())),
        };
        items.push(
            json!({"name": name, "file": path, "title": title, "states": states,
                          "shadowed": shadowed, "problem": problem}),
        );
        let mut line = format!("{name:<20} ");
        match &problem {
            None => line.push_str(&format!("{title} ({})", states.join(" -> "))),
            Some(p) => line.push_str(&format!("INVALID: {p}")),
        }
        if *shadowed {
            line.push_str(" [shadowed]");
        }
        line.push_str(&format!("\n{:<20} {}\n", "", path.display()));
        text.push_str(&line);
    }
    if found.is_empty() {
        text = format!(
            "No workflow templates. Put NAME.json in {} or {}",
            template::search_dirs(std::path::Path::new(&project), ctx.store.home().dir())[0]
                .display(),
            ctx.store.home().dir().join("workflows").display()
        );
    }
    emit(ctx, json!({"status": "ok", "templates": items}), text, 0)
}
