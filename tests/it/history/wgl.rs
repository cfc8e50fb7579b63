//! A linearizability checker: the Wing–Gong search with Lowe's memoization, as in Porcupine.
//! Written here (about 150 lines) rather than taken from a crate: `stateright`'s tester wants
//! its own actor runtime and recorded histories of its own, where ours come from real processes;
//! and the checker must allow operations whose answer is unknown (`info`: killed, timed out).

use std::collections::HashSet;

use super::model::{Call, Ret, State};

/// One operation of a history. `ret == None`: the answer is unknown (killed or timed out); it
/// may or may not have taken effect, at any time after `invoke` and before `complete` (`None`:
/// no bound).
///
/// The harness bounds a killed operation by the completion of the next `done` its client runs
/// for the same instance: the killed process is dead (reaped) before that `done` starts, so on
/// the file home nothing of it can land later; on etcd a request already sent may still
/// arrive, but every commit is a compare-and-swap on the revision it read, and the `done`
/// commits a newer one, so a late arrival fails. Without the bound each unknown operation
/// stays a candidate for the rest of the history and the search grows with the product of
/// them (the long etcd run did not finish in 20 minutes).
#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub call: Call,
    pub ret: Option<Ret>,
    pub invoke: u64,
    pub complete: Option<u64>,
}

/// The verdict.
#[derive(Debug)]
pub enum Verdict {
    Linearizable,
    /// No order fits. `prefix` is the longest order found, `stuck` the operations none of
    /// which can come next, and `state` the model's state before them.
    Violation {
        #[allow(dead_code)]
        prefix: Vec<usize>,
        stuck: Vec<usize>,
        state: State,
    },
    /// The search ran out of its step budget: counted as a failure.
    Timeout,
}

struct Search<'a> {
    ops: &'a [Op],
    seen: HashSet<(Vec<u64>, State)>,
    steps: u64,
    budget: u64,
    best: (Vec<usize>, Vec<usize>, State),
}

fn set(bits: &[u64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

impl Search<'_> {
    fn go(&mut self, bits: &mut Vec<u64>, order: &mut Vec<usize>, state: &State) -> Option<bool> {
        self.steps += 1;
        if self.steps > self.budget {
            return None;
        }
        let pending = |i: usize| !set(bits, i);
        let min_complete = (0..self.ops.len())
            .filter(|&i| pending(i))
            .filter_map(|i| self.ops[i].complete)
            .min();
        let Some(min_complete) = min_complete else {
            return Some(true);
        };
        let candidates: Vec<usize> = (0..self.ops.len())
            .filter(|&i| pending(i) && self.ops[i].invoke < min_complete)
            .collect();
        for &i in &candidates {
            let op = &self.ops[i];
            for next in state.step(&op.call, op.ret.as_ref()) {
                bits[i / 64] |= 1 << (i % 64);
                if self.seen.insert((bits.clone(), next.clone())) {
                    order.push(i);
                    let found = self.go(bits, order, &next)?;
                    if found {
                        return Some(true);
                    }
                    order.pop();
                }
                bits[i / 64] &= !(1 << (i % 64));
            }
        }
        if order.len() >= self.best.0.len() {
            self.best = (order.clone(), candidates, state.clone());
        }
        Some(false)
    }
}

/// Check one partition's history against the model, starting from `initial`.
pub fn check(ops: &[Op], initial: &State, budget: u64) -> Verdict {
    let mut s = Search {
        ops,
        seen: HashSet::new(),
        steps: 0,
        budget,
        best: (Vec::new(), Vec::new(), initial.clone()),
    };
    let mut bits = vec![0u64; ops.len().div_ceil(64).max(1)];
    match s.go(&mut bits, &mut Vec::new(), initial) {
        Some(true) => Verdict::Linearizable,
        Some(false) => Verdict::Violation {
            prefix: s.best.0,
            stuck: s.best.1,
            state: s.best.2,
        },
        None => Verdict::Timeout,
    }
}

/// A page a person can read: one lane per client, each operation a box over its interval,
/// the operations that cannot be ordered in red, and the model's state before them.
pub fn html_report(ops: &[Op], verdict: &Verdict) -> String {
    let (stuck, state): (Vec<usize>, String) = match verdict {
        Verdict::Violation { stuck, state, .. } => (stuck.clone(), format!("{state:#?}")),
        _ => (Vec::new(), String::new()),
    };
    let end = ops
        .iter()
        .map(|o| o.complete.unwrap_or(o.invoke + 1))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let clients = ops.iter().map(|o| o.client).max().unwrap_or(0) + 1;
    let mut boxes = String::new();
    for (i, o) in ops.iter().enumerate() {
        let left = o.invoke as f64 / end * 100.0;
        let width = ((o.complete.unwrap_or(end as u64) - o.invoke) as f64 / end * 100.0).max(0.3);
        let color = if stuck.contains(&i) { "#f88" } else { "#cde" };
        let text = format!("{:?} → {:?}", o.call, o.ret)
            .replace('&', "&amp;")
            .replace('<', "&lt;");
        boxes.push_str(&format!(
            "<div title=\"#{i} {text}\" style=\"position:absolute;top:{}px;left:{left:.3}%;width:{width:.3}%;height:18px;background:{color};border:1px solid #678;overflow:hidden;font:10px monospace\">#{i} {text}</div>\n",
            o.client * 22
        ));
    }
    format!(
        "<!doctype html><meta charset=utf-8><title>history</title><h1>{}</h1>\
         <div style=\"position:relative;height:{}px\">{boxes}</div><h2>Model state before the red operations</h2><pre>{}</pre>",
        match verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::Violation { .. } => "NOT linearizable",
            Verdict::Timeout => "search timed out",
        },
        clients * 22 + 10,
        state.replace('<', "&lt;")
    )
}
