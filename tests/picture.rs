//! The digest's picture (SPEC §16): hand-made histories rendered to PNG and looked at in
//! known places (a blank or wrong picture fails), the caption's words, and `labrouter
//! digest --png` writing a valid PNG from a store on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/png.rs"]
mod png_check;

use std::collections::BTreeMap;

use labrouter::history::{Day, History};
use labrouter::picture::{self, Layout, BACKGROUND};
use png_check::{ihdr, Picture};

/// `n` days ending 2026-12-06, every machine clean but for `trips`: (machine, day index,
/// trips, seconds open).
fn history(machines: &[&str], n: usize, trips: &[(&str, usize, u32, f64)]) -> History {
    let end = jiff::civil::date(2026, 12, 6);
    let days: Vec<String> = (0..n as i64)
        .rev()
        .map(|b| {
            end.checked_sub(jiff::Span::new().days(b))
                .unwrap()
                .to_string()
        })
        .collect();
    let rows = machines
        .iter()
        .map(|m| {
            let row = days
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let hit = trips.iter().find(|(t, at, _, _)| t == m && *at == i);
                    Day {
                        day: d.clone(),
                        trips: hit.map_or(0, |h| h.2),
                        open_s: hit.map_or(0.0, |h| h.3),
                        ..Day::default()
                    }
                })
                .collect();
            (m.to_string(), row)
        })
        .collect::<BTreeMap<_, _>>();
    History {
        timezone: "Europe/Berlin".into(),
        days,
        machines: rows,
    }
}

/// A pixel inside a cell, clear of its frame and its number.
fn fill_pixel(pic: &Picture, r: picture::Rect) -> [u8; 3] {
    pic.at(r.x as u32 + 4, r.y as u32 + 4)
}

#[test]
fn a_day_with_trips_is_coloured_and_framed_unlike_a_clean_day_and_the_background() {
    let h = history(
        &["gpu-box", "ubuntu-box"],
        30,
        &[("gpu-box", 17, 2, 41.0 * 60.0)],
    );
    let png = picture::render(&h).unwrap();
    let (w, hgt) = ihdr(&png);
    assert!(w >= 600, "width {w}");
    let pic = Picture::decode(&png);
    assert_eq!((pic.width, pic.height), (w, hgt));
    let layout = Layout::of(&h);
    assert_eq!((layout.width, layout.height), (w, hgt));
    // The flakiest machine is the first row.
    assert_eq!(layout.rows, ["gpu-box", "ubuntu-box"]);

    let tripped = layout.cell_of("gpu-box", 17).unwrap();
    let clean_same_row = layout.cell_of("gpu-box", 16).unwrap();
    let clean_other_row = layout.cell_of("ubuntu-box", 17).unwrap();
    let bad = fill_pixel(&pic, tripped);
    let clean = fill_pixel(&pic, clean_same_row);
    assert_ne!(bad, BACKGROUND, "the tripped day is not drawn");
    assert_ne!(
        clean, BACKGROUND,
        "a clean day has a cell of its own colour"
    );
    assert_ne!(bad, clean, "a tripped day looks like a clean one");
    assert_eq!(clean, fill_pixel(&pic, clean_other_row));
    assert_eq!(bad, picture::shade(41.0 * 60.0));
    // Framed, and its count written inside.
    let [r, g, b] = pic.at(tripped.x as u32, tripped.y as u32);
    assert!(u32::from(r) + u32::from(g) + u32::from(b) < 150, "no frame");
    let (x, y) = (tripped.x as u32 + 3, tripped.y as u32 + 3);
    assert!(
        pic.dark_in(x, y, tripped.w - 6, tripped.h - 6) > 10,
        "no count"
    );
    let c = clean_same_row;
    assert_eq!(
        pic.dark_in(c.x as u32, c.y as u32, c.w, c.h),
        0,
        "a clean day is marked"
    );
    // Between cells and around the picture: the background.
    assert_eq!(pic.at(0, 0), BACKGROUND);
    assert_eq!(pic.at(w - 1, hgt - 1), BACKGROUND);
}

#[test]
fn the_names_the_totals_and_the_dates_are_written() {
    let h = history(&["gpu-box", "local"], 30, &[("gpu-box", 29, 3, 200.0)]);
    let pic = Picture::decode(&picture::render(&h).unwrap());
    let layout = Layout::of(&h);
    let first = layout.cell_of("gpu-box", 0).unwrap();
    let last = layout.cell_of("gpu-box", 29).unwrap();
    // The name line above each strip: the name on the left, the totals on the right.
    let line = |row: &str| {
        let c = layout.cell_of(row, 0).unwrap();
        (c.y as u32 - 24, 22)
    };
    for row in ["gpu-box", "local"] {
        let (y, h) = line(row);
        assert!(
            pic.dark_in(first.x as u32, y, 120, h) > 40,
            "{row}: no name"
        );
        let right = (last.x as u32 + last.w) - 120;
        assert!(pic.dark_in(right, y, 120, h) > 40, "{row}: no totals");
    }
    // The title and the date range above the rows, the day labels below.
    assert!(pic.dark_in(0, 0, pic.width, 80) > 500, "no title or dates");
    let below = layout.cell_of("local", 0).unwrap();
    let y = below.y as u32 + below.h + 4;
    assert!(pic.dark_in(0, y, pic.width, 26) > 100, "no day labels");
}

#[test]
fn a_blank_or_clean_month_still_draws_every_cell_and_says_no_trips() {
    let h = history(&["gpu-box"], 30, &[]);
    let pic = Picture::decode(&picture::render(&h).unwrap());
    let layout = Layout::of(&h);
    for day in 0..30 {
        let c = layout.cell_of("gpu-box", day).unwrap();
        assert_eq!(fill_pixel(&pic, c), picture::shade(0.0), "day {day}");
    }
    assert_eq!(
        picture::caption(&h),
        "labrouter · 30 days to 2026-12-06 · no trips"
    );
}

#[test]
fn the_caption_names_the_flakiest_machine_with_its_trips_and_time_open() {
    let h = history(
        &["gpu-box", "ubuntu-box"],
        30,
        &[
            ("gpu-box", 3, 1, 1200.0),
            ("gpu-box", 20, 2, 1260.0),
            ("ubuntu-box", 5, 4, 60.0),
        ],
    );
    assert_eq!(
        picture::caption(&h),
        "labrouter · 30 days to 2026-12-06 · flakiest: gpu-box (3 trips, 41 min open)"
    );
    assert_eq!(picture::duration(20.0), "20 s");
    assert_eq!(picture::duration(7500.0), "2 h 5 min");
    assert_eq!(picture::duration(3.0 * 86_400.0 + 4.0 * 3600.0), "3 d 4 h");
}

#[test]
fn ninety_days_and_many_machines_stay_bounded_and_a_trip_still_shows() {
    let names: Vec<String> = (0..60).map(|i| format!("box-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let h = history(&refs, 90, &[("box-07", 45, 1, 30.0)]);
    let png = picture::render(&h).unwrap();
    let (w, hgt) = ihdr(&png);
    assert!(w >= 600 && hgt < 10_000, "{w}×{hgt}");
    let layout = Layout::of(&h);
    assert_eq!(layout.rows.len(), 40);
    assert_eq!(layout.more, 20);
    assert_eq!(layout.rows[0], "box-07", "flakiest first");
    let pic = Picture::decode(&png);
    let c = layout.cell_of("box-07", 45).unwrap();
    let clean = layout.cell_of("box-07", 44).unwrap();
    let (cx, cy) = c.centre();
    assert_ne!(pic.at(cx, cy), BACKGROUND);
    assert_ne!(pic.at(cx, cy), pic.at(clean.centre().0, clean.centre().1));
}

// === labrouter digest --png ===

/// A registry whose memory is under `dir/state`, with a store there, and a Telegram block
/// naming the zone (the token is never read: nothing is sent).
fn lab_on_disk(dir: &std::path::Path) -> std::path::PathBuf {
    let state = dir.join("state");
    let (store, _) = labrouter::store::Store::open(&state).unwrap();
    assert!(store.flush(std::time::Duration::from_secs(5)));
    drop(store);
    let yaml = format!(
        r#"server:
  listen: 127.0.0.1:0
  state_dir: "{}"
machines:
  gpu-box: {{ url: "http://127.0.0.1:9" }}
  ubuntu-box: {{ url: "http://127.0.0.1:9" }}
models:
  coder: {{ machine: gpu-box, name: "qwen3-coder:30b" }}
  small: {{ machine: ubuntu-box, name: "qwen3:4b" }}
routes:
  - name: chat
    default: true
    chain: [coder, small]
telegram:
  token_env: LABROUTER_TEST_NO_SUCH_VAR
  chat_id: 1
  digest_at: "08:00"
  timezone: Europe/Berlin
"#,
        state.display()
    );
    let config = dir.join("registry.yaml");
    std::fs::write(&config, yaml).unwrap();
    config
}

fn labrouter(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .args(args)
        .env_remove("LABROUTER_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn digest_png_writes_a_valid_png_of_the_registrys_machines_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let config = lab_on_disk(dir.path());
    let out_file = dir.path().join("digest.png");
    let out = labrouter(&[
        "digest",
        "--png",
        out_file.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(out.stdout.is_empty(), "the picture goes to the file alone");
    let png = std::fs::read(&out_file).unwrap();
    let (w, h) = ihdr(&png);
    assert!(w >= 600, "{w}×{h}");
    let pic = Picture::decode(&png);
    assert_eq!((pic.width, pic.height), (w, h));
    // Both machines have a row: two strips of 30 drawn cells (a clean month here).
    let clean = picture::shade(0.0);
    let mut cells = 0;
    for y in 0..h {
        if pic.at(40, y) == clean && pic.at(40, y.saturating_sub(1)) != clean {
            cells += 1;
        }
    }
    assert_eq!(cells, 2, "one strip per machine");
    assert!(said.contains("labrouter · 30 days to "), "{said}");
}

#[test]
fn digest_png_to_a_folder_that_does_not_exist_fails_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let config = lab_on_disk(dir.path());
    let bad = dir.path().join("no/such/dir/digest.png");
    let out = labrouter(&[
        "digest",
        "--png",
        bad.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("cannot write the picture to") && said.contains("no/such/dir"),
        "{said}"
    );
    assert!(!bad.exists());
}
