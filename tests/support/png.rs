//! PNG as a test reads it: the signature and the IHDR chunk checked byte by byte (what
//! Telegram looks at first), and the pixels decoded with the `png` crate to look at places.

#![allow(dead_code)] // each test binary uses a different part of it

/// The eight bytes every PNG starts with.
pub const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// Width and height from the IHDR chunk, after checking the signature and that IHDR is the
/// first chunk with its 13 bytes; panics with what was wrong.
pub fn ihdr(bytes: &[u8]) -> (u32, u32) {
    assert!(
        bytes.len() > 33,
        "too short for a PNG: {} bytes",
        bytes.len()
    );
    assert_eq!(bytes[..8], SIGNATURE, "no PNG signature");
    assert_eq!(&bytes[8..12], &[0, 0, 0, 13], "IHDR length is not 13");
    assert_eq!(&bytes[12..16], b"IHDR", "the first chunk is not IHDR");
    let be =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    (be(16), be(20))
}

/// A decoded picture, RGB.
pub struct Picture {
    pub width: u32,
    pub height: u32,
    rgb: Vec<u8>,
}

impl Picture {
    pub fn decode(bytes: &[u8]) -> Picture {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().expect("a readable PNG");
        let mut buf = vec![0; reader.output_buffer_size().expect("a sane size")];
        let info = reader.next_frame(&mut buf).expect("one frame");
        assert_eq!(info.color_type, png::ColorType::Rgb, "RGB pixels");
        assert_eq!(info.bit_depth, png::BitDepth::Eight, "8-bit pixels");
        buf.truncate(info.buffer_size());
        Picture {
            width: info.width,
            height: info.height,
            rgb: buf,
        }
    }

    pub fn at(&self, x: u32, y: u32) -> [u8; 3] {
        assert!(x < self.width && y < self.height, "({x}, {y}) is outside");
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Pixels in the box darker than mid-grey: text or marks drawn there.
    pub fn dark_in(&self, x: u32, y: u32, w: u32, h: u32) -> usize {
        let mut n = 0;
        for yy in y..(y + h).min(self.height) {
            for xx in x..(x + w).min(self.width) {
                let [r, g, b] = self.at(xx, yy);
                if (u32::from(r) + u32::from(g) + u32::from(b)) < 3 * 100 {
                    n += 1;
                }
            }
        }
        n
    }
}
