//! The pixels: an RGB buffer with filled rectangles, coverage blending for glyphs, and the
//! PNG encoding. No drawing library: the chart is rectangles and text.

/// An RGB colour.
pub type Rgb = [u8; 3];

/// A picture being drawn, row-major RGB, every pixel starting as `background`.
pub struct Canvas {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

impl Canvas {
    pub fn new(width: u32, height: u32, background: Rgb) -> Canvas {
        let n = width as usize * height as usize;
        let mut pixels = Vec::with_capacity(n * 3);
        for _ in 0..n {
            pixels.extend_from_slice(&background);
        }
        Canvas {
            width,
            height,
            pixels,
        }
    }

    /// Fills `w × h` pixels from `(x, y)`; whatever falls outside the canvas is cut.
    pub fn fill(&mut self, x: i32, y: i32, w: u32, h: u32, colour: Rgb) {
        for yy in y.max(0)..(y.saturating_add(h as i32)).min(self.height as i32) {
            for xx in x.max(0)..(x.saturating_add(w as i32)).min(self.width as i32) {
                self.blend(xx, yy, colour, 1.0);
            }
        }
    }

    /// A `t`-pixel frame inside the `w × h` box at `(x, y)`.
    pub fn frame(&mut self, x: i32, y: i32, w: u32, h: u32, t: u32, colour: Rgb) {
        self.fill(x, y, w, t, colour);
        self.fill(x, y + h as i32 - t as i32, w, t, colour);
        self.fill(x, y, t, h, colour);
        self.fill(x + w as i32 - t as i32, y, t, h, colour);
    }

    /// Mixes `colour` into one pixel by `coverage` (0 leaves it, 1 replaces it).
    pub fn blend(&mut self, x: i32, y: i32, colour: Rgb, coverage: f32) {
        if x < 0 || y < 0 || x >= self.width as i32 || y >= self.height as i32 {
            return;
        }
        let a = coverage.clamp(0.0, 1.0);
        let at = (y as usize * self.width as usize + x as usize) * 3;
        for (i, c) in colour.iter().enumerate() {
            let old = f32::from(self.pixels[at + i]);
            self.pixels[at + i] = (old + (f32::from(*c) - old) * a).round() as u8;
        }
    }

    /// The picture as PNG bytes (8-bit RGB).
    pub fn png(&self) -> Result<Vec<u8>, png::EncodingError> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.width, self.height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            enc.set_compression(png::Compression::High);
            let mut writer = enc.write_header()?;
            writer.write_image_data(&self.pixels)?;
            writer.finish()?;
        }
        Ok(out)
    }
}
