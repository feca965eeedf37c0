//! `telegram:`: the bot's settings and when the daily digest goes out.

use super::invalid::{err, Invalid};
use super::raw::RawTelegram;
use super::url::validate_url;
use super::Telegram;

pub(super) fn validate_telegram(raw: &RawTelegram) -> Result<Telegram, Invalid> {
    let digest_at = parse_hhmm(&raw.digest_at.value).ok_or_else(|| {
        (
            raw.digest_at.referenced,
            format!(
                "telegram.digest_at: expected a time like \"08:00\", got '{}'",
                raw.digest_at.value
            ),
        )
    })?;
    if jiff::tz::TimeZone::get(&raw.timezone.value).is_err() {
        return err(
            raw.timezone.referenced,
            format!("telegram.timezone: unknown time zone '{}'; expected an IANA name like Europe/Berlin", raw.timezone.value),
        );
    }
    let api_url = raw.api_url.as_ref().map(validate_url).transpose()?;
    Ok(Telegram {
        token_env: raw.token_env.clone(),
        chat_id: raw.chat_id,
        api_url,
        digest_at,
        timezone: raw.timezone.value.clone(),
        alert_on_trip: raw.alert_on_trip,
        page_after_cycles: raw.page_after_cycles.max(1),
    })
}

/// `HH:MM` on a 24-hour clock, as (hour, minute).
fn parse_hhmm(s: &str) -> Option<(u8, u8)> {
    let (h, m) = s.split_once(':')?;
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60 && s.len() == 5).then_some((h, m))
}
