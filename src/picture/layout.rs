//! Where everything goes: the picture's size, each machine's row (flakiest first) and each
//! day's cell. Pure geometry from a [`History`], shared by the drawing and the tests that
//! look at pixels in known places.

use crate::history::History;

/// The picture's width: Telegram shows a photo up to about 800 px wide without scaling it.
pub const WIDTH: u32 = 800;

/// Space left and right of everything.
pub const MARGIN: i32 = 24;

/// Rows drawn at most; more machines are counted in one line below the last row, so the
/// picture's height stays bounded (Telegram refuses photos over 10,000 px on a side).
pub const MAX_ROWS: usize = 40;

/// The title's and the date line's baselines.
pub const TITLE_Y: f32 = 40.0;
pub const DATES_Y: f32 = 70.0;

/// Where the first row starts.
const ROWS_TOP: i32 = 92;

/// A row: the name line, then the strip of cells.
const NAME_LINE: i32 = 26;
const CELL_H: u32 = 28;
const ROW_GAP: i32 = 16;
const ROW_H: i32 = NAME_LINE + CELL_H as i32 + ROW_GAP;

/// What follows the rows: the day labels, the "more machines" line and the legend.
const AXIS_H: i32 = 30;
const MORE_H: i32 = 28;
const LEGEND_H: i32 = 44;

/// A box of pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: u32,
    pub h: u32,
}

impl Rect {
    /// Its middle pixel.
    pub fn centre(&self) -> (u32, u32) {
        (
            (self.x + self.w as i32 / 2).max(0) as u32,
            (self.y + self.h as i32 / 2).max(0) as u32,
        )
    }
}

/// The geometry of one history's picture.
#[derive(Clone, Debug)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    /// The machines drawn, flakiest first (at most [`MAX_ROWS`]).
    pub rows: Vec<String>,
    /// Machines left out for want of room.
    pub more: usize,
    /// Days per strip.
    pub days: usize,
    /// Left edge of the first cell, the distance from one cell to the next, a cell's width.
    strip_x: i32,
    pitch: u32,
    cell_w: u32,
}

impl Layout {
    pub fn of(h: &History) -> Layout {
        let order = h.flakiest_first();
        let more = order.len().saturating_sub(MAX_ROWS);
        let rows: Vec<String> = order
            .into_iter()
            .take(MAX_ROWS)
            .map(str::to_string)
            .collect();
        let days = h.days.len();
        let span = WIDTH - 2 * MARGIN as u32;
        let pitch = span.checked_div(days as u32).unwrap_or(span).max(1);
        let gap = if pitch >= 6 { 2 } else { 0 };
        let strip_x = MARGIN + (span as i32 - (pitch as usize * days) as i32).max(0) / 2;
        let listed = rows.len().max(1) as i32;
        let height =
            ROWS_TOP + listed * ROW_H + AXIS_H + if more > 0 { MORE_H } else { 0 } + LEGEND_H;
        Layout {
            width: WIDTH,
            height: height as u32,
            rows,
            more,
            days,
            strip_x,
            pitch,
            cell_w: pitch - gap,
        }
    }

    /// The top of row `row` (its name line).
    pub fn row_top(&self, row: usize) -> i32 {
        ROWS_TOP + row as i32 * ROW_H
    }

    /// The name line's baseline in row `row`.
    pub fn name_baseline(&self, row: usize) -> f32 {
        (self.row_top(row) + NAME_LINE - 8) as f32
    }

    /// The cell of day `day` (0 is the oldest) in row `row`.
    pub fn cell(&self, row: usize, day: usize) -> Rect {
        Rect {
            x: self.strip_x + (day as u32 * self.pitch) as i32,
            y: self.row_top(row) + NAME_LINE,
            w: self.cell_w,
            h: CELL_H,
        }
    }

    /// The cell of `machine`'s day `day`, when that machine has a row.
    pub fn cell_of(&self, machine: &str, day: usize) -> Option<Rect> {
        let row = self.rows.iter().position(|m| m == machine)?;
        (day < self.days).then(|| self.cell(row, day))
    }

    /// The strip's left and right edges.
    pub fn strip_span(&self) -> (i32, i32) {
        (
            self.strip_x,
            self.strip_x + (self.pitch as usize * self.days) as i32,
        )
    }

    /// The baseline of the day labels under the last row.
    pub fn axis_baseline(&self) -> f32 {
        (self.row_top(self.rows.len().max(1)) + 6) as f32
    }

    /// The baseline of the "more machines" line.
    pub fn more_baseline(&self) -> f32 {
        self.axis_baseline() + MORE_H as f32
    }

    /// The top of the legend.
    pub fn legend_top(&self) -> i32 {
        self.height as i32 - LEGEND_H + 8
    }
}
