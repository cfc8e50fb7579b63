//! The run loop's state machine: one explicit transition table. Every transition the loop makes
//! is checked against it (an illegal one is a bug: an error in tests, logged in production).
//! The table is a set of (from, to) pairs, so no rule can shadow another.

use serde::Serialize;

/// The loop's states (the spec's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Idle,
    Waking,
    FetchingEvents,
    FetchingInbox,
    MarkingSeen,
    Claiming,
    Executing,
    Completing,
    Skipping,
    TimeoutTakeover,
    BackingOff,
    Recovering,
    Error,
}

use State::*;

/// Every state.
pub const ALL: [State; 13] = [
    Idle,
    Waking,
    FetchingEvents,
    FetchingInbox,
    MarkingSeen,
    Claiming,
    Executing,
    Completing,
    Skipping,
    TimeoutTakeover,
    BackingOff,
    Recovering,
    Error,
];

/// The legal transitions.
pub const TABLE: &[(State, State)] = &[
    (Idle, Waking),
    (Waking, FetchingEvents),
    (FetchingEvents, FetchingInbox),
    (FetchingEvents, Error),
    (FetchingInbox, MarkingSeen),
    (FetchingInbox, Claiming),
    (FetchingInbox, Idle),
    (FetchingInbox, Error),
    (MarkingSeen, Claiming),
    (MarkingSeen, Idle),
    (MarkingSeen, Error),
    (Claiming, Executing),
    (Claiming, TimeoutTakeover),
    (Claiming, Idle),
    (Claiming, Error),
    (TimeoutTakeover, Executing),
    (TimeoutTakeover, Recovering),
    (Executing, Completing),
    (Executing, Skipping),
    (Executing, Error),
    (Completing, Idle),
    (Completing, Error),
    (Skipping, Idle),
    (Skipping, Error),
    (Error, BackingOff),
    (BackingOff, Idle),
    (BackingOff, Recovering),
    (Recovering, Idle),
    (Recovering, Claiming),
];

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Idle => "idle",
            Waking => "waking",
            FetchingEvents => "fetching_events",
            FetchingInbox => "fetching_inbox",
            MarkingSeen => "marking_seen",
            Claiming => "claiming",
            Executing => "executing",
            Completing => "completing",
            Skipping => "skipping",
            TimeoutTakeover => "timeout_takeover",
            BackingOff => "backing_off",
            Recovering => "recovering",
            Error => "error",
        }
    }
}

/// True when `from -> to` is in the table.
pub fn legal(from: State, to: State) -> bool {
    TABLE.contains(&(from, to))
}

/// A machine that only moves along the table, remembering the transitions it made.
#[derive(Clone, Debug)]
pub struct Machine {
    pub state: State,
    /// Transitions made since the last [`Machine::drain`].
    pub made: Vec<(State, State)>,
    /// Illegal transitions attempted (a bug; also a panic in debug builds under test).
    pub illegal: Vec<(State, State)>,
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            state: Idle,
            made: Vec::new(),
            illegal: Vec::new(),
        }
    }
}

impl Machine {
    /// Move to `to` if the table allows it; record an illegal attempt otherwise.
    pub fn go(&mut self, to: State) -> bool {
        if legal(self.state, to) {
            if self.made.len() >= 1000 {
                self.made.remove(0);
            }
            self.made.push((self.state, to));
            self.state = to;
            true
        } else {
            self.illegal.push((self.state, to));
            if std::env::var_os("CONDUCTOR_STRICT_MACHINE").is_some() {
                panic!(
                    "illegal transition {} -> {}",
                    self.state.as_str(),
                    to.as_str()
                );
            }
            false
        }
    }

    /// Take the transitions made so far.
    pub fn drain(&mut self) -> Vec<(State, State)> {
        std::mem::take(&mut self.made)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_no_duplicates_and_every_state_is_reachable_and_leavable() {
        for (i, a) in TABLE.iter().enumerate() {
            assert!(!TABLE[i + 1..].contains(a), "duplicate rule {a:?}");
            assert_ne!(a.0, a.1, "self-loop {a:?}");
        }
        for s in ALL {
            assert!(TABLE.iter().any(|(f, _)| *f == s), "{s:?} has no way out");
            assert!(TABLE.iter().any(|(_, t)| *t == s), "{s:?} is unreachable");
        }
        // CanopyKit shadows this one; here it is simply legal.
        assert!(legal(TimeoutTakeover, Recovering));
        assert!(legal(TimeoutTakeover, Executing));
        assert!(!legal(Idle, Executing));
    }

    #[test]
    fn machine_refuses_illegal_moves() {
        let mut m = Machine::default();
        assert!(m.go(Waking));
        assert!(!m.go(Completing));
        assert_eq!(m.state, Waking);
        assert_eq!(m.illegal, [(Waking, Completing)]);
    }
}
