//! The digest's picture (SPEC §16): a [`History`] drawn as a PNG, pure and in-process (no
//! browser, no system font, no outside program). One row per machine, flakiest first: its
//! name and month's totals over a strip of day cells coloured by time open, a day with
//! trips framed and marked with their count; the title, the date range and a legend.
//!
//! - `layout`: where every row and cell goes ([`Layout`], also what tests sample).
//! - `canvas`: the pixel buffer and the PNG encoding (the `png` crate).
//! - `font`: the embedded DejaVu Sans, drawn with `ab_glyph`.
//! - `words`: totals, durations, short dates and the photo's caption.

mod canvas;
mod font;
mod layout;
mod words;

use canvas::{Canvas, Rgb};
use font::{Face, Fonts};
pub use layout::{Layout, Rect, WIDTH};
pub use words::{caption, duration};

use crate::history::{Day, History};
use words::{short_date, Totals};

/// Why a picture could not be made; neither should happen with the vendored font.
#[derive(Debug, thiserror::Error)]
pub enum PictureError {
    #[error("the embedded font cannot be read: {0}")]
    Font(String),
    #[error("the picture cannot be encoded as PNG: {0}")]
    Encode(String),
}

/// The page behind everything.
pub const BACKGROUND: Rgb = [255, 255, 255];
const INK: Rgb = [17, 24, 39];
const MUTED: Rgb = [75, 85, 99];
const TRIP_FRAME: Rgb = [17, 24, 39];

/// The colour scale for time open in a day, with its legend words: up to the first bound
/// (exclusive) the first colour, and so on; past the last bound the last colour.
const SCALE: [(f64, Rgb, &str); 5] = [
    (1.0, [220, 238, 224], "none"),
    (60.0, [253, 230, 138], "< 1 min"),
    (600.0, [251, 191, 36], "< 10 min"),
    (3600.0, [249, 115, 22], "< 1 h"),
    (f64::INFINITY, [220, 38, 38], "≥ 1 h"),
];

/// Text sizes: all at 16 px or more, legible when Telegram shows the photo in the chat.
const TITLE_PX: f32 = 24.0;
const TEXT_PX: f32 = 17.0;
const NAME_PX: f32 = 18.0;
const MARK_PX: f32 = 16.0;

/// The colour of a day that was open `open_s` seconds.
pub fn shade(open_s: f64) -> Rgb {
    let s = if open_s.is_finite() { open_s } else { 0.0 };
    SCALE
        .iter()
        .find(|(bound, _, _)| s < *bound)
        .map_or(SCALE[4].1, |(_, c, _)| *c)
}

/// `h` as PNG bytes, [`WIDTH`] pixels wide, one row per machine flakiest first (at most
/// [`layout::MAX_ROWS`]).
pub fn render(h: &History) -> Result<Vec<u8>, PictureError> {
    let fonts = Fonts::embedded().map_err(|e| PictureError::Font(e.to_string()))?;
    let layout = Layout::of(h);
    let mut c = Canvas::new(layout.width, layout.height, BACKGROUND);
    header(&mut c, &fonts, h);
    for (row, name) in layout.rows.iter().enumerate() {
        let days = h.machines.get(name).map_or(&[][..], Vec::as_slice);
        machine_row(&mut c, &fonts, &layout, row, name, days);
    }
    if layout.rows.is_empty() {
        let y = layout.name_baseline(0);
        let words = "no machines in the registry";
        fonts.draw(
            &mut c,
            (layout::MARGIN as f32, y),
            Face::Regular,
            TEXT_PX,
            MUTED,
            words,
        );
    }
    axis(&mut c, &fonts, &layout, h);
    legend(&mut c, &fonts, &layout);
    c.png().map_err(|e| PictureError::Encode(e.to_string()))
}

/// The title and the date range with the zone.
fn header(c: &mut Canvas, fonts: &Fonts, h: &History) {
    let x = layout::MARGIN as f32;
    let title = format!("labrouter · trips over {} days", h.days.len());
    fonts.draw(c, (x, layout::TITLE_Y), Face::Bold, TITLE_PX, INK, &title);
    let first = h.days.first().map_or("", String::as_str);
    let last = h.days.last().map_or("", String::as_str);
    let dates = format!("{first} – {last} · {} · flakiest first", h.timezone);
    let max = (WIDTH as i32 - 2 * layout::MARGIN) as f32;
    let dates = fonts.fit(Face::Regular, TEXT_PX, &dates, max);
    fonts.draw(
        c,
        (x, layout::DATES_Y),
        Face::Regular,
        TEXT_PX,
        MUTED,
        &dates,
    );
}

/// One machine: its name, its totals on the right, its strip of days.
fn machine_row(c: &mut Canvas, fonts: &Fonts, l: &Layout, row: usize, name: &str, days: &[Day]) {
    let (left, right) = l.strip_span();
    let y = l.name_baseline(row);
    let totals = Totals::of(days).words();
    let totals_w = fonts.width(Face::Regular, TEXT_PX, &totals);
    let room = (right - left) as f32 - totals_w - 16.0;
    let shown = fonts.fit(Face::Bold, NAME_PX, name, room.max(40.0));
    fonts.draw(c, (left as f32, y), Face::Bold, NAME_PX, INK, &shown);
    let tx = right as f32 - totals_w;
    fonts.draw(c, (tx, y), Face::Regular, TEXT_PX, INK, &totals);
    for i in 0..l.days {
        let day = days.get(i).cloned().unwrap_or_default();
        day_cell(c, fonts, l.cell(row, i), &day);
    }
}

/// A day's cell: its colour by time open; with trips, a dark frame and the count.
fn day_cell(c: &mut Canvas, fonts: &Fonts, r: Rect, day: &Day) {
    let colour = shade(day.open_s);
    c.fill(r.x, r.y, r.w, r.h, colour);
    if day.trips == 0 {
        return;
    }
    c.frame(r.x, r.y, r.w, r.h, 2, TRIP_FRAME);
    let count = if day.trips > 99 {
        "+".to_string()
    } else {
        day.trips.to_string()
    };
    let w = fonts.width(Face::Bold, MARK_PX, &count);
    if w + 4.0 > r.w as f32 {
        // Too narrow for the number (a long span): a dark block says "tripped".
        let side = (r.w / 2).max(1);
        let (cx, cy) = r.centre();
        c.fill(
            cx as i32 - side as i32 / 2,
            cy as i32 - side as i32 / 2,
            side,
            side,
            TRIP_FRAME,
        );
        return;
    }
    let ink = if luminance(colour) < 140.0 {
        BACKGROUND
    } else {
        INK
    };
    let x = r.x as f32 + (r.w as f32 - w) / 2.0;
    let y = r.y as f32 + r.h as f32 / 2.0 + MARK_PX * 0.36;
    fonts.draw(c, (x, y), Face::Bold, MARK_PX, ink, &count);
}

fn luminance([r, g, b]: Rgb) -> f32 {
    0.299 * f32::from(r) + 0.587 * f32::from(g) + 0.114 * f32::from(b)
}

/// The first, middle and last day under the strips; the count of machines left out.
fn axis(c: &mut Canvas, fonts: &Fonts, l: &Layout, h: &History) {
    let (left, right) = l.strip_span();
    let y = l.axis_baseline();
    if let Some(first) = h.days.first() {
        fonts.draw(
            c,
            (left as f32, y),
            Face::Regular,
            TEXT_PX,
            MUTED,
            &short_date(first),
        );
    }
    if h.days.len() >= 3 {
        let mid = h.days.len() / 2;
        let text = short_date(&h.days[mid]);
        let w = fonts.width(Face::Regular, TEXT_PX, &text);
        let x = l.cell(0, mid).centre().0 as f32 - w / 2.0;
        fonts.draw(c, (x, y), Face::Regular, TEXT_PX, MUTED, &text);
    }
    if let Some(last) = h.days.last().filter(|_| h.days.len() > 1) {
        let text = format!("today, {}", short_date(last));
        let w = fonts.width(Face::Regular, TEXT_PX, &text);
        fonts.draw(
            c,
            (right as f32 - w, y),
            Face::Regular,
            TEXT_PX,
            MUTED,
            &text,
        );
    }
    if l.more > 0 {
        let more = format!("+ {} more machines, not drawn", l.more);
        fonts.draw(
            c,
            (left as f32, l.more_baseline()),
            Face::Regular,
            TEXT_PX,
            MUTED,
            &more,
        );
    }
}

/// The colour scale's swatches with their words, then what a framed cell means.
fn legend(c: &mut Canvas, fonts: &Fonts, l: &Layout) {
    let top = l.legend_top();
    let baseline = top as f32 + 15.0;
    let mut x = layout::MARGIN as f32;
    x += fonts.draw(c, (x, baseline), Face::Regular, TEXT_PX, MUTED, "open:") + 10.0;
    for (_, colour, words) in SCALE {
        c.fill(x as i32, top, 18, 18, colour);
        x += 24.0;
        x += fonts.draw(c, (x, baseline), Face::Regular, TEXT_PX, MUTED, words) + 14.0;
    }
    let mark = Day {
        trips: 2,
        ..Day::default()
    };
    let r = Rect {
        x: x as i32 + 4,
        y: top - 4,
        w: 24,
        h: 26,
    };
    day_cell(c, fonts, r, &mark);
    let x = (r.x + r.w as i32 + 6) as f32;
    fonts.draw(c, (x, baseline), Face::Regular, TEXT_PX, MUTED, "trips");
}
