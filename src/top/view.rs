//! Drawing a `top` screen with ratatui: the four sections stacked, the selected row marked, or
//! one row's details. Any backend (the terminal, or ratatui's `TestBackend` in tests).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::symbols::border;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, HighlightSpacing, List, ListItem, ListState, Paragraph};

use super::app::App;
use super::model::{ItemRef, Section};
use conductor::time::Timestamp;

/// Borders a plain terminal can draw (TERM=dumb, a serial console, --ascii).
pub const ASCII_BORDER: border::Set = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

/// Text for the screen: with ASCII only, the few other symbols the overview uses are replaced.
fn text(app: &App, s: String) -> String {
    if !app.ascii || s.is_ascii() {
        return s;
    }
    s.chars()
        .map(|c| match c {
            '·' => '-',
            '✓' => 'x',
            '●' => '*',
            '…' => '~',
            '→' => '>',
            c if c.is_ascii() => c,
            _ => '?',
        })
        .collect()
}

fn block(app: &App, title: String) -> Block<'static> {
    let b = Block::default()
        .borders(Borders::ALL)
        .title(text(app, title));
    if app.ascii {
        b.border_set(ASCII_BORDER)
    } else {
        b
    }
}

/// The key help of the bottom line.
pub fn keys_help(app: &App) -> &'static str {
    match (app.detail, app.ascii) {
        (true, _) => "Esc back · q quit",
        (false, true) => "up/down or j/k select · Tab next section · Enter details · q quit",
        (false, false) => "↑/↓ or j/k select · Tab next section · Enter details · q quit",
    }
}

/// Draw the whole screen.
pub fn draw(f: &mut Frame, app: &App, now: Timestamp) {
    let o = &app.overview;
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(text(
            app,
            format!("conductor top · {} · seq {} · {}", o.home, o.seq, now),
        )),
        head,
    );
    f.render_widget(Paragraph::new(text(app, keys_help(app).to_string())), foot);
    match (app.detail, app.current()) {
        (true, Some(it)) => draw_detail(f, app, it, body, now),
        _ => draw_sections(f, app, body, now),
    }
}

fn draw_sections(f: &mut Frame, app: &App, area: Rect, now: Timestamp) {
    let o = &app.overview;
    // Each section gets room in proportion to its rows (at least one line for "none").
    let mut weights: Vec<Constraint> = Section::ALL
        .iter()
        .map(|s| Constraint::Fill(o.height(*s).max(1) as u16 + 2))
        .collect();
    // What is landing and the edits nobody claimed, after the instances, only when there is
    // something to show (not selectable).
    let mut extra: Vec<(String, &Vec<String>)> = Vec::new();
    if !o.landing.is_empty() {
        extra.push((super::model::LANDING_TITLE.to_string(), &o.landing));
    }
    if !o.unclaimed.is_empty() {
        extra.push((super::model::UNCLAIMED_TITLE.to_string(), &o.unclaimed));
    }
    for (k, (_, lines)) in extra.iter().enumerate() {
        weights.insert(1 + k, Constraint::Fill(lines.len() as u16 + 2));
    }
    let areas = Layout::vertical(weights).split(area);
    for (k, (title, lines)) in extra.iter().enumerate() {
        let lines: Vec<Line> = lines
            .iter()
            .map(|l| Line::from(text(app, l.clone())))
            .collect();
        let title = format!(" {title} ");
        f.render_widget(Paragraph::new(lines).block(block(app, title)), areas[1 + k]);
    }
    let current = app.current();
    for (i, section) in Section::ALL.into_iter().enumerate() {
        let i = if i > 0 { i + extra.len() } else { i };
        let n = o.len(section);
        let title = match section {
            Section::Queue => format!(" {} · {} ", section.title(), o.progress_line()),
            _ => format!(" {} ({n}) ", section.title()),
        };
        let items: Vec<ListItem> = if n == 0 {
            vec![ListItem::new(section.empty())]
        } else {
            (0..n)
                .map(|index| {
                    let lines: Vec<Line> = o
                        .lines(ItemRef { section, index }, now)
                        .into_iter()
                        .map(|l| Line::from(text(app, l)))
                        .collect();
                    ListItem::new(lines)
                })
                .collect()
        };
        let list = List::new(items)
            .block(block(app, title))
            .highlight_symbol("> ")
            .highlight_spacing(HighlightSpacing::Always)
            .highlight_style(Style::default().add_modifier(Modifier::REVERSED));
        let mut state = ListState::default();
        if let Some(cur) = current.filter(|c| c.section == section) {
            state.select(Some(cur.index));
        }
        f.render_stateful_widget(list, areas[i], &mut state);
    }
}

fn draw_detail(f: &mut Frame, app: &App, it: ItemRef, area: Rect, now: Timestamp) {
    let lines: Vec<Line> = app
        .overview
        .details(it, now)
        .into_iter()
        .map(|l| Line::from(text(app, l)))
        .collect();
    let title = format!(" {} · details ", it.section.title());
    f.render_widget(Paragraph::new(lines).block(block(app, title)), area);
}

/// The screen as text, drawn off-screen (ratatui's `TestBackend`) at `width` x `height`:
/// `top --once`, and what tests read. Trailing spaces are cut.
pub fn frame(app: &App, width: u16, height: u16, now: Timestamp) -> String {
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
        .expect("an off-screen terminal");
    let _ = term.draw(|f| draw(f, app, now));
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        let mut line = String::new();
        for x in 0..width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
