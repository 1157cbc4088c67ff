//! RFC 3339 `date-time` syntax: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.

/// Whether `s` is an RFC 3339 date-time with a real calendar date. `T` may also be `t` or a
/// space, `Z` may be `z` (RFC 3339 §5.6). Leap seconds (`:60`) are refused: the table's
/// timestamp type cannot hold them.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 {
        return false;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let digits = &b[range];
        digits.iter().all(u8::is_ascii_digit).then(|| {
            digits
                .iter()
                .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'))
        })
    };
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        num(0..4),
        num(5..7),
        num(8..10),
        num(11..13),
        num(14..16),
        num(17..19),
    ) else {
        return false;
    };
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return false;
    }
    if b[13] != b':' || b[16] != b':' {
        return false;
    }
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return false;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &fraction[digits..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            let all_digits = [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit());
            all_digits
                && (h1 - b'0') * 10 + (h2 - b'0') <= 23
                && (m1 - b'0') * 10 + (m2 - b'0') <= 59
        }
        _ => false,
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::is_rfc3339;

    #[test]
    fn accepts_rfc3339() {
        for ok in [
            "2026-01-09T12:00:00Z",
            "2026-01-09t12:00:00z",
            "2026-01-09 12:00:00Z",
            "2026-01-09T12:00:00.123456Z",
            "2026-01-09T12:00:00+05:30",
            "2024-02-29T00:00:00-00:00",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
    }

    #[test]
    fn refuses_the_rest() {
        for bad in [
            "",
            "2026-01-09",
            "2026-01-09T12:00:00",
            "2026-01-09T12:00Z",
            "2026-13-09T12:00:00Z",
            "2026-02-29T12:00:00Z",
            "2026-01-09T24:00:00Z",
            "2026-01-09T12:00:60Z",
            "2026-01-09T12:00:00.Z",
            "2026-01-09T12:00:00+0530",
            "2026-01-09T12:00:00+24:00",
            "09/01/2026 12:00",
            "2026-01-09T12:00:00Zjunk",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
