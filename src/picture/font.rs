//! Text on the picture: DejaVu Sans (regular and bold, subset to Latin-1 and a few signs,
//! vendored under `assets/fonts/` with its licence) embedded in the binary and rasterised
//! with `ab_glyph`. No system font is ever read.

use ab_glyph::{Font as _, FontRef, PxScale, ScaleFont as _};

use super::canvas::{Canvas, Rgb};

const REGULAR: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const BOLD: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-Bold.ttf");

/// Which face a text is set in.
#[derive(Clone, Copy, Debug)]
pub enum Face {
    Regular,
    Bold,
}

/// The two faces, parsed once per picture.
pub struct Fonts {
    regular: FontRef<'static>,
    bold: FontRef<'static>,
}

impl Fonts {
    /// The embedded faces; an error only if the vendored files were damaged.
    pub fn embedded() -> Result<Fonts, ab_glyph::InvalidFont> {
        Ok(Fonts {
            regular: FontRef::try_from_slice(REGULAR)?,
            bold: FontRef::try_from_slice(BOLD)?,
        })
    }

    fn face(&self, face: Face) -> &FontRef<'static> {
        match face {
            Face::Regular => &self.regular,
            Face::Bold => &self.bold,
        }
    }

    /// How wide `text` is at `px` pixels, in pixels.
    pub fn width(&self, face: Face, px: f32, text: &str) -> f32 {
        let font = self.face(face).as_scaled(PxScale::from(px));
        text.chars().map(|c| font.h_advance(font.glyph_id(c))).sum()
    }

    /// `text` cut with an ellipsis so that it is at most `max` pixels wide.
    pub fn fit(&self, face: Face, px: f32, text: &str, max: f32) -> String {
        if self.width(face, px, text) <= max {
            return text.to_string();
        }
        let mut cut: String = text.to_string();
        while !cut.is_empty() && self.width(face, px, &format!("{cut}…")) > max {
            cut.pop();
        }
        format!("{cut}…")
    }

    /// Draws `text` with its baseline at `y`, starting at `x`; returns its width. A
    /// character the font lacks is drawn as the font's missing-glyph box.
    pub fn draw(
        &self,
        canvas: &mut Canvas,
        (x, y): (f32, f32),
        face: Face,
        px: f32,
        colour: Rgb,
        text: &str,
    ) -> f32 {
        let font = self.face(face).as_scaled(PxScale::from(px));
        let mut pen = x;
        for c in text.chars() {
            let id = font.glyph_id(c);
            let glyph = id.with_scale_and_position(px, ab_glyph::point(pen, y));
            pen += font.h_advance(id);
            let Some(outline) = self.face(face).outline_glyph(glyph) else {
                continue;
            };
            let b = outline.px_bounds();
            outline.draw(|gx, gy, coverage| {
                let px = b.min.x as i32 + gx as i32;
                let py = b.min.y as i32 + gy as i32;
                canvas.blend(px, py, colour, coverage);
            });
        }
        pen - x
    }
}
