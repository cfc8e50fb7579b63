//! `conductor top` (a live terminal overview of the home, drawn with ratatui) and
//! `conductor status --watch` (the same overview as plain text or JSON lines).
//!
//! Both are woken by the store's watcher on the journal (every domain's transaction appends to
//! it), never by polling the home: [`model`] reads the domains into an [`model::Overview`]
//! (pure once read), [`app`] holds the screen's state between keys, [`view`] draws it.

pub mod app;
pub mod model;
pub mod view;

use std::io::{IsTerminal, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};

use crate::face::Ctx;
use app::{App, Key};
use conductor::error::{Error, Reason, Result};
use conductor::store::watch;
use conductor::time::Timestamp;

/// The long help of `top`.
pub const ABOUT: &str = "A live overview of the home in the terminal: instances and their claims, agents \
and their inboxes, workflow sessions and their states, queue jobs and their progress. It is \
redrawn as things happen (woken by the file system watcher on the event journal; the home is \
never polled), and once a second for the clocks.\n\n\
Keys: up/down or j/k select a row, Tab jumps to the next section, Enter opens the row's details \
(Esc goes back), q or Ctrl-C quits. No mouse is needed; it works over SSH. With TERM=dumb, or \
--ascii, the borders are drawn with ASCII characters.\n\n\
For scripts and narrow terminals: `conductor status --watch` (text) or `--json --watch` (one \
JSON document per change).";

/// The arguments of `top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Draw borders with ASCII characters only (the default when TERM is dumb or unset).
    #[arg(long)]
    pub ascii: bool,
    /// Print one screen as text and exit (no terminal needed), like `top -b -n 1`.
    #[arg(long)]
    pub once: bool,
    /// The screen's size for --once.
    #[arg(long, value_name = "COLSxROWS", default_value = "100x30", value_parser = parse_size)]
    pub size: (u16, u16),
}

fn parse_size(s: &str) -> std::result::Result<(u16, u16), String> {
    let bad = || format!("`{s}` is not COLSxROWS (e.g. 100x30, each 10 to 1000)");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (u16, u16) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if !(10..=1000).contains(&w) || !(10..=1000).contains(&h) {
        return Err(bad());
    }
    Ok((w, h))
}

/// What wakes the screen.
enum Msg {
    Changed,
    Key(Key),
    Redraw,
    Stop,
}

/// Forward a watcher's wakeups as `msg` on `tx` (from a thread of its own).
fn forward(w: watch::HomeWatcher, tx: Sender<Msg>) {
    std::thread::spawn(move || {
        loop {
            match w.wait(None) {
                watch::Wake::Changed => {
                    if tx.send(Msg::Changed).is_err() {
                        return;
                    }
                }
                watch::Wake::Timeout => {}
                watch::Wake::Stop => return,
            }
        }
    });
}

/// The channel a live view waits on (`top`, `status --watch`): [`Msg::Stop`] on SIGINT or
/// SIGTERM, [`Msg::Changed`] after each journal commit. Call it before any thread (it blocks the
/// stop signals, which then become a message) and before the first read (it watches first, so
/// nothing committed in between is missed). The sender is for more sources (keys).
fn live_channel(ctx: &Ctx) -> Result<(Sender<Msg>, Receiver<Msg>)> {
    watch::block_stop_signals();
    let (tx, rx) = channel::<Msg>();
    let stop = tx.clone();
    watch::on_stop(move || {
        let _ = stop.send(Msg::Stop);
    });
    forward(
        ctx.store
            .watcher(conductor::store::journal::is_journal_file)?,
        tx.clone(),
    );
    Ok((tx, rx))
}

/// The key a terminal key event stands for.
fn map_key(k: event::KeyEvent) -> Option<Key> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    Some(match k.code {
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::Quit,
        KeyCode::Char('q') | KeyCode::Char('Q') => Key::Quit,
        KeyCode::Up | KeyCode::Char('k') => Key::Up,
        KeyCode::Down | KeyCode::Char('j') => Key::Down,
        KeyCode::Tab => Key::NextSection,
        KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') => Key::Enter,
        KeyCode::Esc | KeyCode::Left | KeyCode::Backspace | KeyCode::Char('h') => Key::Back,
        _ => return None,
    })
}

/// Puts the terminal back as it was, however `top` ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(
            std::io::stdout(),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
    }
}

fn term_err(e: std::io::Error) -> Error {
    Error::io("draw on", std::path::Path::new("the terminal"), e)
}

/// True when the terminal cannot be trusted with more than ASCII.
fn plain_terminal() -> bool {
    std::env::var("TERM").map_or(true, |t| t.is_empty() || t == "dumb")
}

/// Run `top`.
pub fn run(ctx: &Ctx, args: TopArgs) -> Result<u8> {
    if args.once {
        let app = App::new(model::read(&ctx.store)?, args.ascii || plain_terminal());
        let (w, h) = args.size;
        let text = view::frame(&app, w, h, Timestamp::now());
        crate::face::write_out(&mut std::io::stdout().lock(), text.as_bytes())?;
        return Ok(0);
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "conductor top needs a terminal; for scripts use `conductor status --watch` (or \
             `--json status --watch`)",
        ));
    }
    let ascii = args.ascii || plain_terminal();
    let (tx, rx) = live_channel(ctx)?;
    let mut app = App::new(model::read(&ctx.store)?, ascii);

    terminal::enable_raw_mode().map_err(term_err)?;
    let _restore = Restore;
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    )
    .map_err(term_err)?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout())).map_err(term_err)?;
    let keys = tx.clone();
    std::thread::spawn(move || {
        loop {
            let msg = match event::read() {
                Ok(Event::Key(k)) => match map_key(k) {
                    Some(k) => Msg::Key(k),
                    None => continue,
                },
                Ok(Event::Resize(..)) => Msg::Redraw,
                Ok(_) => continue,
                Err(_) => Msg::Stop,
            };
            let stop = matches!(msg, Msg::Stop);
            if keys.send(msg).is_err() || stop {
                return;
            }
        }
    });
    drop(tx);
    loop {
        term.draw(|f| view::draw(f, &app, Timestamp::now()))
            .map_err(term_err)?;
        let mut changed = false;
        for msg in next(&rx) {
            match msg {
                Msg::Stop => return Ok(0),
                Msg::Key(k) => {
                    // Keys typed after a change apply to the newer overview.
                    if changed {
                        app.update(model::read(&ctx.store)?);
                        changed = false;
                    }
                    if !app.key(k) {
                        return Ok(0);
                    }
                }
                Msg::Changed => changed = true,
                Msg::Redraw => {}
            }
        }
        if changed {
            app.update(model::read(&ctx.store)?);
        }
    }
}

/// The messages that arrived: waits for one (a second at most: then a redraw for the clocks;
/// the home is not read for that), then takes all that are queued, so a burst of changes is
/// read once.
fn next(rx: &Receiver<Msg>) -> Vec<Msg> {
    let first = match rx.recv_timeout(Duration::from_secs(1)) {
        Ok(m) => m,
        Err(RecvTimeoutError::Timeout) => return vec![Msg::Redraw],
        Err(RecvTimeoutError::Disconnected) => return vec![Msg::Stop],
    };
    let mut all = vec![first];
    all.extend(rx.try_iter());
    all
}

/// `conductor status --watch`: the overview as text (or, with --json, one JSON document per
/// line), printed at start and again after each change that alters it, until SIGINT/SIGTERM or
/// a closed stdout (exit 0).
pub fn watch_status(ctx: &Ctx) -> Result<u8> {
    let (tx, rx) = live_channel(ctx)?;
    drop(tx);
    let width = if std::io::stdout().is_terminal() {
        terminal::size().map_or(80, |(w, _)| w as usize)
    } else {
        120
    };
    let mut last: Option<model::Overview> = None;
    let mut first = true;
    loop {
        let o = model::read(&ctx.store)?;
        // A change that alters nothing shown (the seq aside) prints nothing.
        let same = last.as_ref().is_some_and(|l| {
            let mut l = l.clone();
            l.seq = o.seq;
            l == o
        });
        if !same {
            let mut out = std::io::stdout().lock();
            let text = if ctx.out.json {
                serde_json::to_string(&o).expect("the overview serializes") + "\n"
            } else {
                format!(
                    "{}{}\n",
                    if first { "" } else { "\n" },
                    o.to_text(Timestamp::now(), width)
                )
            };
            first = false;
            if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(0);
                }
                return Err(Error::io("write to", std::path::Path::new("stdout"), e));
            }
            last = Some(o);
        }
        loop {
            match rx.recv() {
                Ok(Msg::Changed) => {
                    while let Ok(m) = rx.try_recv() {
                        if matches!(m, Msg::Stop) {
                            return Ok(0);
                        }
                    }
                    break;
                }
                Ok(Msg::Stop) | Err(_) => return Ok(0),
                Ok(_) => {}
            }
        }
    }
}
