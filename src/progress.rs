//! What a long-running loop of a domain (the agent run loop, the workflow supervisor) has to say
//! to the person running it. The loops never print: they hand notes to the face that runs them.

/// One thing to tell the person running a loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A status line (it started, what it does next).
    Status(String),
    /// Something went wrong and the loop goes on.
    Warning(String),
}
