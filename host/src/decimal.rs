//! Exact decimal parsing: a JSON number or string to an unscaled integer of a given
//! precision and scale, without going through floating point.

/// Parses `text` (`-12.5`, `18`, `1.8e1`, `"0.10"` without its quotes) as a decimal of
/// `precision` digits, `scale` of them after the point. Returns the unscaled value
/// (`18.00` at scale 2 is `1800`).
pub fn parse_decimal(text: &str, precision: u32, scale: u32) -> Result<i128, String> {
    let t = text.trim();
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => {
            let exp: i32 = body[at + 1..]
                .parse()
                .map_err(|_| format!("{text:?} is not a number"))?;
            (&body[..at], exp)
        }
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !digits_ok(int_part)
        || !digits_ok(frac_part)
    {
        return Err(format!("{text:?} is not a number"));
    }
    // All digits, and the position of the decimal point after applying the exponent.
    let digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    let point = int_part.len() as i64 + i64::from(exponent);
    // More digits than an i128 holds do not fit any decimal (38 digits at most).
    let too_large = || format!("{text} does not fit DECIMAL({precision},{scale})");
    let mut value: i128 = 0;
    let mut integer_digits = 0u32;
    let wanted_end = point + i64::from(scale); // digits kept: [0, point + scale)
    for (i, &d) in digits.iter().enumerate() {
        let i = i as i64;
        if i >= wanted_end {
            if d != 0 {
                return Err(format!("{text} has more than {scale} decimal places"));
            }
            continue;
        }
        if i < point && (value != 0 || d != 0) {
            integer_digits += 1;
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(d)))
            .ok_or_else(too_large)?;
    }
    // Pad with zeros up to the scale when the text had fewer digits (none to add to a
    // zero, whose exponent may be huge).
    let kept = (digits.len() as i64).min(wanted_end.max(0));
    if value != 0 {
        for _ in kept..wanted_end {
            value = value.checked_mul(10).ok_or_else(too_large)?;
        }
    }
    if point > digits.len() as i64 {
        integer_digits += if value == 0 {
            0
        } else {
            (point - digits.len() as i64) as u32
        };
    }
    if integer_digits > precision.saturating_sub(scale) {
        return Err(format!(
            "{text} does not fit DECIMAL({precision},{scale}): at most {} digits before the point",
            precision - scale
        ));
    }
    Ok(if negative { -value } else { value })
}

/// Formats an unscaled decimal, for messages and tests.
pub fn format_decimal(value: i128, scale: u32) -> String {
    let negative = value < 0;
    let digits = value.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    let sign = if negative { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values() {
        for (text, want) in [
            ("18", 1800),
            ("18.0", 1800),
            ("18.5", 1850),
            ("0.07", 7),
            ("-3.10", -310),
            ("1.8e1", 1800),
            ("1850e-2", 1850),
            ("0", 0),
            ("99999999.99", 9_999_999_999),
            ("12.300", 1230),
            ("000123.4", 12340),
        ] {
            assert_eq!(parse_decimal(text, 10, 2), Ok(want), "{text}");
        }
    }

    #[test]
    fn refusals() {
        assert!(
            parse_decimal("1.234", 10, 2)
                .unwrap_err()
                .contains("decimal places")
        );
        assert!(
            parse_decimal("100000000", 10, 2)
                .unwrap_err()
                .contains("DECIMAL(10,2)")
        );
        assert!(parse_decimal("1e9", 10, 2).is_err());
        for bad in ["", "-", ".", "1.2.3", "abc", "1e", "--1", "1,5"] {
            assert!(parse_decimal(bad, 10, 2).is_err(), "{bad}");
        }
    }

    /// Found by the encoder's randomised property: `{"dec":1E37}` overflowed an i128 (a
    /// panic in debug builds, a wrong value in release ones), and a huge exponent looped
    /// once per power of ten.
    #[test]
    fn huge_numbers_do_not_fit_and_do_not_overflow() {
        for text in [
            "1E37",
            "1e39",
            "123456789012345678901234567890123456789012",
            "7e2147483647",
        ] {
            let error = parse_decimal(text, 10, 2).unwrap_err();
            assert!(error.contains("DECIMAL(10,2)"), "{text}: {error}");
        }
        assert_eq!(parse_decimal("0e2147483647", 10, 2), Ok(0));
        assert_eq!(parse_decimal("1e-2147483648", 10, 2).ok(), None);
    }

    #[test]
    fn formats() {
        assert_eq!(format_decimal(1800, 2), "18.00");
        assert_eq!(format_decimal(-7, 2), "-0.07");
        assert_eq!(format_decimal(42, 0), "42");
    }
}
