//! The match setup file: one match per line.
//!
//! ```text
//! # id       seats humans  optional key value pairs
//! match 1001 seats 4 humans 0,1,2 ai_order_delay 8 checksum_interval 30
//! match 1002 seats 2 humans 0,1 tick_rate_millihz 15000 bundle_interval 2
//! ```
//!
//! Keys: `tick_rate_millihz`, `bundle_interval` (1 when absent),
//! `checksum_interval`, `ai_order_delay` (0 when absent, S10),
//! `timing_policy` (`adaptive` when absent, `tracking`, `fixed:SP/LA`, `ra`,
//! `protocol0`, or `off`: each client's own jitter buffer), run per seat,
//! `pace_to_slowest` (`no` when absent; `yes`: the tick rate follows the
//! slowest machine), `max_ticks` (none when absent), `load_wait_seconds`,
//! `grace_seconds`.
//! Blank lines and `#` comments are ignored. The relay re-reads the file when
//! it changes and adds matches it has not seen (a lobby creates a match by
//! appending a line); a line it cannot parse is reported and skipped.

use rungs_core::relay::MatchSetup;
use rungs_core::timing::PolicyKind;

/// Largest match id: a signed 64-bit integer, as lobbies' databases store
/// ids (0 is refused: an id never set).
pub const MAX_MATCH_ID: u64 = i64::MAX as u64;
/// Tick rates a served match may have, mHz: 1 to 120 ticks a second (a
/// tick per frame of the fastest lockstep games, with room; a faster
/// clock would have the relay bundling for nobody).
pub const TICK_RATES_MILLIHZ: std::ops::RangeInclusive<u32> = 1_000..=120_000;
/// Longest load wait and reconnect grace, seconds (an hour).
pub const MAX_WAIT_SECONDS: u64 = 3600;

/// `value` if it is in `range`, else an error naming the key and the range.
pub fn in_range<T: PartialOrd + std::fmt::Display>(
    key: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, String> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "`{key}` must be {} to {}, got {value}",
            range.start(),
            range.end()
        ))
    }
}

/// Defaults the command line and environment give every match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// Load barrier, seconds.
    pub load_wait_seconds: u64,
    /// Reconnect grace, seconds.
    pub grace_seconds: u64,
}

fn number<T: std::str::FromStr>(key: &str, value: Option<&str>) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("`{key}` needs a value"))?;
    value
        .parse()
        .map_err(|_| format!("`{key}` value `{value}` is not a valid number"))
}

/// Parse one line: `Ok(None)` for a blank or comment line.
pub fn parse_line(line: &str, defaults: &Defaults) -> Result<Option<MatchSetup>, String> {
    let line = line.split('#').next().unwrap_or("").trim();
    if line.is_empty() {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    if words.next() != Some("match") {
        return Err("a line starts with `match <id>`".into());
    }
    let id = in_range("match", number("match", words.next())?, 1..=MAX_MATCH_ID)?;
    let mut seats: Option<u8> = None;
    let mut humans: Option<u16> = None;
    let mut extra: Vec<(String, String)> = Vec::new();
    while let Some(key) = words.next() {
        let value = words.next();
        match key {
            "seats" => seats = Some(in_range(key, number(key, value)?, 1..=16)?),
            "humans" => {
                let list = value.ok_or("`humans` needs a list like 0,1,2")?;
                let mut mask = 0u16;
                for seat in list.split(',') {
                    let s: u8 = number("humans", Some(seat))?;
                    if s >= 16 {
                        return Err(format!("human seat {s} is not 0 to 15"));
                    }
                    mask |= 1 << s;
                }
                humans = Some(mask);
            }
            _ => extra.push((
                key.to_string(),
                value.ok_or(format!("`{key}` needs a value"))?.to_string(),
            )),
        }
    }
    let seats = seats.ok_or("missing `seats N`")?;
    let humans = humans.ok_or("missing `humans LIST`")?;
    let mut setup = MatchSetup::new(id, seats, humans);
    // S10: a match setup without `ai_order_delay` means 0 (the behaviour of
    // setups written before the field existed); lobbies creating new
    // matches write `ai_order_delay 8`.
    setup.ai_order_delay = 0;
    let wait = 0..=MAX_WAIT_SECONDS;
    setup.start_barrier_us = in_range(
        "load_wait_seconds",
        defaults.load_wait_seconds,
        wait.clone(),
    )? * 1_000_000;
    setup.reconnect_grace_us =
        in_range("grace_seconds", defaults.grace_seconds, wait.clone())? * 1_000_000;
    for (key, value) in extra {
        let v = Some(value.as_str());
        match key.as_str() {
            "tick_rate_millihz" => {
                setup.tick_rate_millihz = in_range(&key, number(&key, v)?, TICK_RATES_MILLIHZ)?
            }
            "bundle_interval" => {
                setup.bundle_interval = in_range(&key, number(&key, v)?, 1..=u8::MAX)?
            }
            "checksum_interval" => setup.checksum_interval = number(&key, v)?,
            "ai_order_delay" => setup.ai_order_delay = in_range(&key, number(&key, v)?, 0..=8)?,
            "timing_policy" if value == "off" => setup.timing_policy = None,
            "timing_policy" => match PolicyKind::from_name(&value) {
                Some(Ok(policy)) => setup.timing_policy = Some(policy),
                Some(Err(e)) => return Err(format!("`timing_policy` `{value}`: {e}")),
                None => {
                    return Err(format!(
                        "`timing_policy` `{value}` is not adaptive, tracking, fixed:SP/LA, ra, protocol0, protocol0-ts or off"
                    ))
                }
            },
            "pace_to_slowest" => {
                setup.pace_to_slowest = match value.as_str() {
                    "yes" | "1" => true,
                    "no" | "0" => false,
                    _ => return Err(format!("`pace_to_slowest` `{value}` is not yes or no")),
                }
            }
            "max_ticks" => setup.max_ticks = in_range(&key, number(&key, v)?, 1..=u32::MAX)?,
            "load_wait_seconds" => {
                setup.start_barrier_us = in_range(&key, number(&key, v)?, wait.clone())? * 1_000_000
            }
            "grace_seconds" => {
                setup.reconnect_grace_us =
                    in_range(&key, number(&key, v)?, wait.clone())? * 1_000_000
            }
            _ => return Err(format!("unknown key `{key}`")),
        }
    }
    setup.validate().map_err(|e| e.to_string())?;
    Ok(Some(setup))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Defaults = Defaults {
        load_wait_seconds: 60,
        grace_seconds: 30,
    };

    #[test]
    fn parses_matches_and_reports_mistakes() {
        assert_eq!(parse_line("  # nothing", &D), Ok(None));
        let s = parse_line("match 7 seats 4 humans 0,2 ai_order_delay 0 # x", &D)
            .unwrap()
            .unwrap();
        assert_eq!((s.match_id, s.seat_count, s.human_mask), (7, 4, 0b101));
        assert_eq!(s.ai_order_delay, 0);
        assert_eq!(s.start_barrier_us, 60_000_000);
        assert_eq!(s.reconnect_grace_us, 30_000_000);
        let s = parse_line("match 8 seats 2 humans 0 load_wait_seconds 5", &D)
            .unwrap()
            .unwrap();
        assert_eq!(s.start_barrier_us, 5_000_000);
        assert_eq!(s.ai_order_delay, 0, "absent means 0 (S10)");
        assert!(parse_line("game 7", &D).unwrap_err().contains("match"));
        assert!(parse_line("match 7 seats 4", &D)
            .unwrap_err()
            .contains("humans"));
        assert!(parse_line("match 7 seats 2 humans 0,5", &D)
            .unwrap_err()
            .contains("human_mask"));
        assert!(parse_line("match 7 seats 2 humans 0 colour blue", &D)
            .unwrap_err()
            .contains("colour"));
        assert!(parse_line("match x seats 2 humans 0", &D).is_err());
        for (line, error) in [
            (
                "match 18446744073709551615 seats 2 humans 0",
                "`match` must be 1 to 9223372036854775807, got 18446744073709551615",
            ),
            (
                "match 0 seats 2 humans 0",
                "`match` must be 1 to 9223372036854775807, got 0",
            ),
            (
                "match 7 seats 2 humans 0 tick_rate_millihz 1000000000",
                "`tick_rate_millihz` must be 1000 to 120000, got 1000000000",
            ),
            (
                "match 7 seats 2 humans 0 tick_rate_millihz 999",
                "`tick_rate_millihz` must be 1000 to 120000, got 999",
            ),
            (
                "match 7 seats 17 humans 0",
                "`seats` must be 1 to 16, got 17",
            ),
            (
                "match 7 seats 2 humans 0 bundle_interval 0",
                "`bundle_interval` must be 1 to 255, got 0",
            ),
            (
                "match 7 seats 2 humans 0 ai_order_delay 9",
                "`ai_order_delay` must be 0 to 8, got 9",
            ),
            (
                "match 7 seats 2 humans 0 grace_seconds 3601",
                "`grace_seconds` must be 0 to 3600, got 3601",
            ),
            (
                "match 7 seats 2 humans 0 load_wait_seconds 99999999999999",
                "`load_wait_seconds` must be 0 to 3600, got 99999999999999",
            ),
            (
                "match 7 seats 2 humans 0 max_ticks 0",
                "`max_ticks` must be 1 to 4294967295, got 0",
            ),
            (
                "match 7 seats 2 humans 0 max_ticks 4294967296",
                "`max_ticks` value `4294967296` is not a valid number",
            ),
        ] {
            assert_eq!(parse_line(line, &D), Err(error.to_string()), "{line}");
        }
        let s = parse_line(
            "match 9223372036854775807 seats 2 humans 0 tick_rate_millihz 120000",
            &D,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.match_id, i64::MAX as u64);
        let far = Defaults {
            load_wait_seconds: 7200,
            grace_seconds: 30,
        };
        assert_eq!(
            parse_line("match 1 seats 2 humans 0", &far),
            Err("`load_wait_seconds` must be 0 to 3600, got 7200".to_string())
        );
        let s = parse_line("match 9 seats 2 humans 0,1", &D)
            .unwrap()
            .unwrap();
        assert_eq!(
            s.timing_policy,
            Some(PolicyKind::Adaptive),
            "absent: adaptive"
        );
        for (word, policy) in [
            ("tracking", Some(PolicyKind::Tracking)),
            ("off", None),
            (
                "fixed:2/6",
                Some(PolicyKind::Fixed(rungs_core::timing::Timing::START)),
            ),
        ] {
            let line = format!("match 9 seats 2 humans 0,1 timing_policy {word}");
            assert_eq!(
                parse_line(&line, &D).unwrap().unwrap().timing_policy,
                policy
            );
        }
        assert!(
            parse_line("match 9 seats 2 humans 0 timing_policy fixed:2/7", &D)
                .unwrap_err()
                .contains("multiple")
        );
        assert!(
            parse_line("match 9 seats 2 humans 0 timing_policy fast", &D)
                .unwrap_err()
                .contains("fast")
        );
        let s = parse_line("match 9 seats 2 humans 0", &D).unwrap().unwrap();
        assert!(!s.pace_to_slowest, "a slow machine slows only itself");
        assert_eq!(s.bundle_interval, 1);
        let s = parse_line("match 9 seats 2 humans 0 pace_to_slowest yes", &D)
            .unwrap()
            .unwrap();
        assert!(s.pace_to_slowest);
        assert!(
            parse_line("match 9 seats 2 humans 0 pace_to_slowest maybe", &D)
                .unwrap_err()
                .contains("maybe")
        );
    }
}
