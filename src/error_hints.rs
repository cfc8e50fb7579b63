//! The next step for each [`Reason`], shown as `hint: …` under an error whose call site gave
//! none: every error a person sees says what to do about it.

use crate::error::Reason;

/// What to do after an error with this reason, when the call site said nothing more precise.
pub fn default_hint(r: Reason) -> &'static str {
    match r {
        Reason::InvalidInput => {
            "fix the value the message names (the field and the rule it breaks), then repeat"
        }
        Reason::UnknownOperation => "`conductor op --help` lists the operations this build knows",
        Reason::InvalidInstanceId => "`conductor status` lists the live instances and their ids",
        Reason::InvalidPath => {
            "name a file (src/a.rs), a directory (src/) or a quoted glob ('src/**/*.rs')"
        }
        Reason::PathOutsideProject => {
            "give the path inside the instance's project, or an absolute path"
        }
        Reason::InvalidDirectory => {
            "pass an existing directory (--dir), or run the command from inside one"
        }
        Reason::NotHeld => {
            "`conductor status` shows who holds what; `release --force` releases it anyway"
        }
        Reason::AlreadyFinished => {
            "nothing to do: the session already ended; `conductor history` shows it"
        }
        Reason::InvalidOutcome => {
            "`conductor done --help` lists the outcomes a session can end with"
        }
        Reason::ClaimTooWide => {
            "claim the directories you will edit (src/, docs/) rather than everything"
        }
        Reason::InvalidGlob => "quote the glob so the shell leaves it alone: 'src/**/*.rs'",
        Reason::NoHome => "set HOME, or pass --home DIR (or CONDUCTOR_HOME)",
        Reason::UnparseableSettings => {
            "fix or move the settings file, then run `conductor integrate` again; it is never overwritten"
        }
        Reason::FileExists => {
            "move the existing file away (conductor never overwrites it), then run the command again"
        }
        Reason::UnknownAgent => {
            "`conductor agent list` shows the registered agents; `conductor agent register NAME` adds one"
        }
        Reason::UnknownChannel => {
            "`conductor messages CHANNEL` reads a channel once someone posted to it"
        }
        Reason::UnknownItem => "`conductor inbox` lists the actionable items and their ids",
        Reason::UnknownMention => {
            "`conductor mentions` lists the unacknowledged mentions and their ids"
        }
        Reason::MessageNotFound => "`conductor messages CHANNEL` lists the messages and their ids",
        Reason::NotAuthor => "post a new message instead, or edit with --as the author",
        Reason::NotActionable => "`conductor inbox` lists the items still pending or seen",
        Reason::ClaimHeld => "wait for the holder's claim to expire, or work on another item",
        Reason::NotHolder => "`conductor inbox --agent NAME` shows who holds each item",
        Reason::CompletionRefRequired => "pass --ref KEY=VALUE, like --ref post_id=msg-000012",
        Reason::InvalidTtl => "pick a --ttl between 15 and 1800 seconds",
        Reason::PostTooLarge => {
            "shorten the post, or put the long text in a file and post its path"
        }
        Reason::InvalidArtifact => {
            "`conductor artifact validate FILE` lists every problem of the blocks"
        }
        Reason::UnknownKey => "`conductor agent key list` shows the API keys",
        Reason::RemoteRefused => "serve on 127.0.0.1, or pass --allow-remote with an API key",
        Reason::ListenFailed => "pick another --listen address (port 0 picks a free one)",
        Reason::UnknownSession => "`conductor workflow list` shows the sessions and their ids",
        Reason::AmbiguousSession => "give more of the session id",
        Reason::UnknownTemplate => "`conductor workflow templates` lists the templates it can find",
        Reason::InvalidTemplate => {
            "`conductor workflow validate TEMPLATE` lists every problem with its JSON path"
        }
        Reason::InvalidTransition => {
            "`conductor workflow show SESSION` shows the current state and where it may go next"
        }
        Reason::InvalidWorkflowOperation => {
            "`conductor workflow show SESSION` shows the session's status"
        }
        Reason::InvalidPersona => {
            "fix the persona file named in the message, or name another persona"
        }
        Reason::InvalidRules => "fix the rule named in the message; the rules file is YAML",
        Reason::InvalidRef => "a reference is KEY=VALUE, like --ref post_id=msg-000012",
        Reason::AlreadySupervised => "let the running supervisor finish, or stop it first",
        Reason::InvalidManifest => "`conductor queue submit --help` shows the manifest's rules",
        Reason::DuplicateJob => "give each job its own id",
        Reason::UnknownDocs => "`ls ~/.docpull` shows the doc collections that exist",
        Reason::UnknownJob => "`conductor queue jobs` lists the jobs and their ids",
        Reason::AmbiguousJob => "give WORKSPACE/JOB, or more of the job id",
        Reason::UnknownWorkspace => "`conductor queue jobs --all` lists the workspaces",
        Reason::NotRetryable => {
            "only failed, timed-out or cancelled jobs are retried; `conductor queue show JOB` shows its state"
        }
        Reason::InvalidRunner => "use --runner local, sandbox, or a template containing {cmd}",
        Reason::UnsafeSecretsFile => "chmod 600 the secrets file (a regular file, not a link)",
        Reason::InvalidSecretsFile => "write one NAME=value per line (# comments allowed)",
        Reason::ReservedSecretName => {
            "rename the secret: conductor and the runner set that variable"
        }
        Reason::PlannerFailed => {
            "the planner's output is in the message; run it again or write the manifest yourself"
        }
        Reason::NoInstance => "call the `start` tool first: it registers this session's instance",
        Reason::McpFailed => {
            "check that the MCP client speaks to conductor over stdio (`conductor mcp --help`)"
        }
        Reason::SpawnFailed => {
            "check that the program exists and is executable (`command -v NAME`)"
        }
        Reason::GitFailed => "run the command from inside a git repository, with git 2.38 or newer",
    }
}

/// The next step after a store error whose own hint said nothing, by its reason.
pub fn store_hint(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "io" => "the message names the file and what failed; `conductor doctor` checks the home",
        "unsafe_home" => "`conductor doctor` explains; the home must be yours and private (0700)",
        "cursor_expired" => {
            "the events before it were rotated away: read from the oldest kept (`conductor events --oldest`)"
        }
        "invalid_input" => "`conductor COMMAND --help` shows what is accepted",
        "invalid_store" => "a store URL is etcd://HOST:PORT[,HOST:PORT...][/PREFIX]",
        "store_refused" => {
            "nothing was changed: split the command into smaller ones (etcd bounds one request)"
        }
        "no_home" => "set HOME, or pass --home DIR (or CONDUCTOR_HOME)",
        "no_working_directory" => "cd into a directory that exists",
        "target_not_empty" => "import into an empty home (--home DIR) or an unused store prefix",
        _ => return None,
    })
}
